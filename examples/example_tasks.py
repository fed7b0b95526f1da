"""An application's tasks: what examples/test_example_tasks.py tests (see the README's "Testing your tasks")."""

import json

from asynqpy import ReceivedTask, ServeMux, SkipRetry

mux = ServeMux()


class PaymentGateway:
    """Stands for a remote service; a test makes it fail."""

    def __init__(self) -> None:
        self.down_for = 0  # how many calls fail before it answers again
        self.charged: list[tuple[str, int]] = []

    def charge(self, customer: str, cents: int) -> None:
        if self.down_for:
            self.down_for -= 1
            raise ConnectionError("gateway unreachable")
        self.charged.append((customer, cents))


gateway = PaymentGateway()


@mux.task("invoice:charge", max_retry=5)
def charge(customer: str, cents: int) -> None:
    if cents <= 0:
        raise SkipRetry(f"nothing to charge: {cents} cents")
    gateway.charge(customer, cents)


@mux.handler("report:render")
def render(task: ReceivedTask) -> None:
    rows = json.loads(task.payload)
    task.write_result(f"{len(rows)} rows".encode())
