"""graphfuse's dialects: `graph` (tensor ops with fusion kinds); installed as graphfuse.dialects."""
