"""The LLM layer: the OpenAI-compatible client and its response cache (``client``), the embedded llama.cpp server
(``local``) and the prompt templates (``prompts/``). Imports only the core."""
