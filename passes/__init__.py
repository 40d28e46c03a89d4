"""graphfuse's analyses, fusion passes and rewrite patterns; installed as graphfuse.passes."""
