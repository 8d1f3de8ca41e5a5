"""The LLM layer: the OpenAI-compatible client (``client``, which re-exports the names of the modules it composes:
``config``, ``templates``, ``records``, ``cache``, ``usage``, ``pacing``, ``retries``, ``refusals``, ``transport``,
``failures``), the embedded llama.cpp server (``local``) and the prompt templates (``prompts/``). Imports only the
core."""
