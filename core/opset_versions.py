"""The ai.onnx opsets ``export()`` targets (a module without imports, so the command line
can name them without loading torch)."""

MIN_OPSET = 7
MAX_OPSET = 26
DEFAULT_OPSET = 20
