from provenance.cli import main

raise SystemExit(main())
