"""I/O: the model-call activity (OpenAI-compatible chat completions over httpx).

`activities.model_call.ModelGateway` holds the settings, the key and the shared HTTP
client; its `call_model` method is the activity the worker registers.
"""
