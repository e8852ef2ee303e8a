"""The model runtimes: the embedder, micro-batching, ONNX sessions and the trained cross-encoders,
the llama.cpp server, what every SDK call and streamed call share, and what paid calls cost."""
