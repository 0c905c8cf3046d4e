"""The operators' arguments as the engine takes them: rendered templates read into typed values
(``rendered``), and the split's and the stream's options validated once, with their defaults
(``split_options``, ``stream_options``)."""
