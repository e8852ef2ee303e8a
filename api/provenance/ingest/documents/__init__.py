"""Documents in the formats people keep them in, read into the blocks the chunker consumes: one reader a
format (markdown, html, docx, pdf), chosen by `read.read_document` from the file name."""
