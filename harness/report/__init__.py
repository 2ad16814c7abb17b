"""Reports: pure functions of result records (no TensorFlow, no engine)."""
