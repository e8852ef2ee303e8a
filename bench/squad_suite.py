"""Write a retrieval suite from SQuAD articles (`../shared/training/`, which is not copied into the project):
one Markdown file per article, each paragraph a `##` section as in `../shared/benchmarks/squad2-normans`, and a
`cases.jsonl` of its answerable questions with their reference answers as `mustIncludeAny`. Retrieval benches
read it as a suite folder; it holds many questions that nothing here was chosen on.

    .venv/bin/python -m bench.squad_suite ../shared/training/squad1-dev-13-articles.jsonl /tmp/squad-five \\
        --titles Apollo_program,Chloroplast,Genghis_Khan,Kenya,Teacher
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def write_suite(source: Path, out: Path, titles: list[str]) -> tuple[int, int]:
    """(paragraphs, questions) written under `out`."""
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    (out / "corpus").mkdir(parents=True, exist_ok=True)
    paragraphs = questions = 0
    with (out / "cases.jsonl").open("w") as cases:
        for title in titles:
            of_article = [r for r in rows if r["title"] == title]
            if not of_article:
                raise SystemExit(f"no article {title!r} in {source}")
            contexts = list(dict.fromkeys(r["context"] for r in of_article))
            name = title.replace("_", " ")
            sections = [f"## {name}, part {n}\n\n{text}\n" for n, text in enumerate(contexts, 1)]
            (out / "corpus" / f"{title.lower()}.md").write_text(f"# {name}\n\n" + "\n".join(sections))
            paragraphs += len(contexts)
            for r in of_article:
                answers = sorted({a.strip() for a in r["answers"] if a.strip()})
                if r.get("is_impossible") or not answers:
                    continue
                case = {
                    "id": r["id"],
                    "bucket": "answerable",
                    "question": r["question"],
                    "expect": "answer",
                    "mustIncludeAny": answers,
                }
                cases.write(json.dumps(case) + "\n")
                questions += 1
    return paragraphs, questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a SQuAD articles file (one question a line)")
    parser.add_argument("out", type=Path, help="the suite folder to write (corpus/ and cases.jsonl)")
    parser.add_argument("--titles", required=True, help="the articles, comma-separated")
    args = parser.parse_args()
    paragraphs, questions = write_suite(args.source, args.out, args.titles.split(","))
    print(f"{paragraphs} paragraphs, {questions} questions in {args.out}")


if __name__ == "__main__":
    main()
