"""One adapter module per library, all with the interface of bench.adapters.base.Adapter.

Each module defines ADAPTER (its Adapter subclass) and the worker side of that library: the no-op
task, and whatever the library's worker command imports (a settings object, a broker, an app).
"""

# name -> module, in the order of the table
LIBS: dict[str, str] = {
    "asynqpy": "bench.adapters.asynqpy_adapter",
    "go": "bench.adapters.go_adapter",
    "huey": "bench.adapters.huey_adapter",
    "dramatiq": "bench.adapters.dramatiq_adapter",
    "saq": "bench.adapters.saq_adapter",
    "arq": "bench.adapters.arq_adapter",
    "rq": "bench.adapters.rq_adapter",
}
