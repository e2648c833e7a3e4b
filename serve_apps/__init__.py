"""Ray Serve applications built from a promoted servetune config.

Each engine has one builder referenced by import path in ``promoted.yaml``:

- ``serve_apps.sim:build_app``: the simulated engine behind an OpenAI-compatible proxy (no GPU needed);
- ``serve_apps.vllm:build_app``: vLLM through ``ray.serve.llm`` (``LLMConfig`` + ``build_openai_app``);
- ``serve_apps.sglang:build_app``: SGLang through Ray Serve LLM's ``SGLangServer``;
- both fall back (``server: auto``) or switch (``server: process``) to ``serve_apps.engine_process``: the
  engine's own OpenAI server in each replica, for an engine version Ray Serve LLM cannot load.

All builders take the same arguments (`serve_apps.args.AppArgs`), written by `tuner.promote`.
"""
