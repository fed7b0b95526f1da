"""Typed tasks: signature checks at enqueue, JSON forms, conversion on the worker, mismatches archived at once."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import subprocess
import sys
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, Literal, NamedTuple, NewType, NotRequired, Protocol, Required, TypedDict
from uuid import UUID

import pydantic
import pytest
import redis

from asynqpy import AsyncClient, Client, InvalidArgumentError, ReceivedTask, ServeMux, TaskOptions, TaskState
from asynqpy.convert import Mismatch, encode, fit, go_time
from asynqpy.rdb import keys
from asynqpy.testing import run_task
from asynqpy.typed import PayloadMismatch, TypedTask, describe, dumps, registered, task
from asynqpy.wire import decode_task_message
from tests.helpers import running, wait_for


class Tier(enum.Enum):
    FREE = "free"
    PRO = "pro"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    qty: int
    unit_price: Decimal = Decimal("0")


@dataclasses.dataclass(frozen=True)
class Address:
    city: str
    lines: list[Line]
    tags: dict[str, int] = dataclasses.field(default_factory=dict)


class Customer(pydantic.BaseModel):
    id: UUID
    email: str
    since: date


class GoStyle(pydantic.BaseModel):  # the names of a Go struct's json tags, by alias
    model_config = pydantic.ConfigDict(populate_by_name=True)
    user_id: int = pydantic.Field(alias="userId")
    display_name: str = pydantic.Field(alias="displayName", default="")


ID = UUID("2f1d3c4b-5a69-4788-9aab-bccddeeff001")
DUE = datetime(2026, 3, 1, 9, 30, 0, 120000, tzinfo=timezone(timedelta(hours=2)))


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """asyncio.run in a thread of its own (a loop may be running in this one, e.g. Playwright's)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


UserId = NewType("UserId", int)


class Shipment(TypedDict, total=False):  # under this module's `from __future__ import annotations`
    carrier: Required[str]
    weight: int
    note: NotRequired[str | None]


class Point(NamedTuple):
    x: int
    label: str = ""


@dataclasses.dataclass
class Broken:
    part: Nowhere  # type: ignore[name-defined]  # noqa: F821  # resolves nowhere: refused when decorated


def make_mux() -> tuple[ServeMux, dict[str, TypedTask[Any, Any]]]:
    mux = ServeMux()

    @mux.task("email:welcome", queue="critical", max_retry=5)
    def send_welcome(to: str, name: str = "there") -> str:
        return f"Welcome, {name} <{to}>"

    @mux.task("invoice:send")
    async def send_invoice(invoice_id: UUID, amount: Decimal, due: datetime, tier: Tier, level: Level,
                           ship_to: Address, lines: list[Line] | None = None, note: str | None = None) -> None:
        return None

    return mux, {"welcome": send_welcome, "invoice": send_invoice}


# -- producer side: the payload and the checks ----------------------------------------------------------------


def test_payload_is_a_json_object_of_the_arguments_by_name() -> None:
    _, t = make_mux()
    welcome = t["welcome"]
    assert welcome.to_task("ada@example.com").payload == b'{"to":"ada@example.com"}'
    assert welcome.to_task("ada@example.com", "Ada").payload == b'{"to":"ada@example.com","name":"Ada"}'
    assert welcome.to_task(name="Ada", to="a@b").payload == b'{"name":"Ada","to":"a@b"}'
    assert welcome.to_task("a@b").type == "email:welcome"


def test_json_forms_are_what_go_reads() -> None:
    _, t = make_mux()
    payload = t["invoice"].to_task(
        ID, Decimal("19.90"), DUE, Tier.PRO, Level.HIGH,
        Address("Berlin", [Line("A-1", 2, Decimal("9.95"))], {"gift": 1}), note=None).payload
    assert json.loads(payload) == {
        "invoice_id": str(ID), "amount": "19.90", "due": "2026-03-01T09:30:00.12+02:00", "tier": "pro",
        "level": 2, "ship_to": {"city": "Berlin", "lines": [{"sku": "A-1", "qty": 2, "unit_price": "9.95"}],
                                "tags": {"gift": 1}},
        "note": None}
    # a number given for a Decimal parameter goes as the documented string form, not as a JSON number
    numeric = t["invoice"].to_task(ID, 0.1, DUE, Tier.PRO, Level.HIGH, Address("Berlin", [], {}), note=None).payload
    assert json.loads(numeric)["amount"] == "0.1"
    assert go_time(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05Z"
    assert go_time(datetime(2026, 1, 2, 3, 4, 5, 500, tzinfo=timezone(-timedelta(hours=5, minutes=30)))) == \
        "2026-01-02T03:04:05.0005-05:30"
    assert encode(b"\x00\xff", "b") == "AP8="  # Go's []byte is base64
    assert encode(date(2026, 2, 3), "d") == "2026-02-03"
    assert encode({3, 1, 2}, "s") == [1, 2, 3]
    assert encode(Customer(id=ID, email="a@b", since=date(2020, 1, 1)), "c") == \
        {"id": str(ID), "email": "a@b", "since": "2020-01-01"}


def test_dumps_escapes_as_go_json_marshal_does() -> None:
    assert dumps({"html": "<a href='x'>&</a>", "ls": "\u2028", "ü": "é"}) == \
        '{"html":"\\u003ca href=\'x\'\\u003e\\u0026\\u003c/a\\u003e","ls":"\\u2028","ü":"é"}'.encode()


@pytest.mark.parametrize(("call", "argument", "words"), [
    (lambda w: w.to_task(), "to", "missing the required argument 'to'"),
    (lambda w: w.to_task(too="x@y"), "too", "unexpected argument 'too'"),
    (lambda w: w.to_task("a@b", to="c@d"), "to", "multiple values for argument 'to'"),
    (lambda w: w.to_task("a", "b", "c"), "#3", "takes 2 positional arguments but 3 were given"),
    (lambda w: w.to_task(to=5), "to", "to: expected a string, got a number"),
    (lambda w: w.to_task(to=object()), "to", "type object has no JSON form"),
    (lambda w: w.to_task(to="a", name=float("nan")), "name", "not a finite number"),
])
def test_bad_arguments_raise_naming_them(call: Any, argument: str, words: str) -> None:
    _, t = make_mux()
    with pytest.raises(InvalidArgumentError) as err:
        call(t["welcome"])
    assert err.value.argument == argument
    assert words in str(err.value)


def test_nested_and_typed_arguments_are_checked_at_enqueue() -> None:
    _, t = make_mux()
    inv = t["invoice"]
    good = dict(invoice_id=ID, amount=Decimal(1), due=DUE, tier=Tier.FREE, level=Level.LOW,
                ship_to=Address("Oslo", []))
    inv.to_task(**good)
    for name, value, words in [
        ("due", datetime(2026, 1, 1), "naive datetime"),
        ("tier", "gold", "'gold' is not a Tier (one of 'free', 'pro')"),
        ("ship_to", Address("Oslo", [Line("x", "2")]), "ship_to.lines[0].qty: expected an integer"),  # type: ignore[arg-type]
        ("ship_to", {"city": "Oslo"}, "ship_to.lines: is missing"),
        ("lines", [{"sku": 1, "qty": 1}], "lines[0].sku: expected a string"),
    ]:
        with pytest.raises(InvalidArgumentError) as err:
            inv.to_task(**{**good, name: value})
        assert err.value.argument == name
        assert words in str(err.value)


def test_bad_signatures_and_options_are_refused_at_decoration() -> None:
    mux = ServeMux()
    with pytest.raises(InvalidArgumentError) as err:
        mux.task("t:star")(lambda *args: None)
    assert err.value.argument == "args"
    with pytest.raises(InvalidArgumentError) as err:
        mux.task("t:opt", max_retry=-1)
    assert err.value.argument == "max_retry"
    with pytest.raises(InvalidArgumentError) as err:
        mux.task("t:opt", bogus=1)
    assert err.value.argument == "bogus"
    with pytest.raises(InvalidArgumentError) as err:
        mux.task(" ")(lambda: None)
    assert err.value.argument == "type"


def test_options_builder_merges_over_the_decorators_defaults() -> None:
    _, t = make_mux()
    w = t["welcome"]
    assert (w.defaults.queue, w.defaults.max_retry) == ("critical", 5)
    later = w.options(process_in=timedelta(hours=1))
    assert (later.defaults.queue, later.defaults.max_retry, later.defaults.process_in) == \
        ("critical", 5, timedelta(hours=1))
    low = w.options(TaskOptions(queue="low", unique=60), max_retry=1)
    assert (low.defaults.queue, low.defaults.max_retry, low.defaults.unique) == ("low", 1, 60)
    assert w.defaults.queue == "critical" and w.defaults.process_in is None  # the original is untouched
    assert low("a@b") == "Welcome, there <a@b>" and low.type == w.type
    with pytest.raises(InvalidArgumentError) as err:
        w.options(queue="")
    assert err.value.argument == "queue"
    with pytest.raises(InvalidArgumentError) as err:
        w.options({"queue": "x"})  # type: ignore[arg-type]
    assert err.value.argument == "options"


def test_a_function_parameter_named_like_an_option_or_the_client_is_not_shadowed() -> None:
    mux = ServeMux()

    @mux.task("ship:parcel", queue="ship")
    def ship(client: str, queue: str, timeout: int, options: list[str]) -> str:
        return f"{client} {queue} {timeout} {options}"

    payload = ship.to_task(client="acme", queue="north", timeout=3, options=["fragile"]).payload
    assert json.loads(payload) == {"client": "acme", "queue": "north", "timeout": 3, "options": ["fragile"]}
    assert ship.defaults.queue == "ship"
    assert ship("acme", "north", 3, []) == "acme north 3 []"


def test_direct_call_runs_the_function() -> None:
    _, t = make_mux()
    assert t["welcome"]("ada@example.com", name="Ada") == "Welcome, Ada <ada@example.com>"
    assert run_async(t["invoice"](ID, Decimal(1), DUE, Tier.PRO, Level.LOW, Address("x", []))) is None
    assert t["welcome"].__wrapped__.__name__ == "send_welcome"


# -- worker side: conversion and mismatches ---------------------------------------------------------------


def test_decode_converts_to_the_annotated_types() -> None:
    _, t = make_mux()
    go_payload = json.dumps({
        "invoice_id": str(ID), "amount": 19.9, "due": "2026-03-01T09:30:00.123456789+02:00", "tier": "pro",
        "level": 2, "ship_to": {"city": "Oslo", "lines": [{"sku": "A", "qty": 2, "unit_price": "1.5"}],
                                "tags": {"a": 1}},
        "lines": None, "added_by_a_newer_producer": True}).encode()
    args = t["invoice"].decode(go_payload)
    assert args == {"invoice_id": ID, "amount": Decimal("19.9"),
                    "due": datetime(2026, 3, 1, 9, 30, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
                    "tier": Tier.PRO, "level": Level.HIGH,
                    "ship_to": Address("Oslo", [Line("A", 2, Decimal("1.5"))], {"a": 1}), "lines": None}
    assert isinstance(args["level"], Level)


@pytest.mark.parametrize(("payload", "field", "words"), [
    (b'{"name": "x"}', "to", "to: required argument is missing"),
    (b'{"to": 5}', "to", "to: expected a string, got a number"),
    (b'["a@b"]', "", "must be a JSON object of its arguments, not an array"),
    (b"", "", "not null"),
    (b"\xff", "", "is not JSON"),
    (b'{"to": null}', "to", "expected a string, got null"),
])
def test_payloads_that_do_not_fit_name_the_field(payload: bytes, field: str, words: str) -> None:
    _, t = make_mux()
    with pytest.raises(PayloadMismatch) as err:
        t["welcome"].decode(payload)
    assert err.value.field == field
    assert words in str(err.value)
    assert "email:welcome" in str(err.value)


def test_fit_of_generic_annotations() -> None:
    assert fit([1, 2], tuple[int, ...], "t") == (1, 2)
    assert fit([1, "a"], tuple[int, str], "t") == (1, "a")
    assert fit(["a", "a"], set[str], "s") == {"a"}
    assert fit({"1": "x"}, dict[int, str], "m") == {1: "x"}
    assert fit("b", Literal["a", "b"], "l") == "b"
    assert fit(3, int | str, "u") == 3 and fit("3", int | str, "u") == "3"
    assert fit(2.0, int, "i") == 2 and fit(2, float, "f") == 2.0
    assert fit("AP8=", bytes, "b") == b"\x00\xff"
    assert fit({"id": str(ID), "email": "a@b", "since": "2020-01-01"}, Customer, "c") == \
        Customer(id=ID, email="a@b", since=date(2020, 1, 1))
    for value, tp, where in [(True, int, "x"), (2.5, int, "x"), ([1, "a"], list[int], "x[1]"),
                             ({"id": "nope", "email": "a", "since": "2020-01-01"}, Customer, "x.id"),
                             ("c", Literal["a", "b"], "x"), ("zz", bytes, "x"), ("2026-13-01", date, "x")]:
        with pytest.raises(Mismatch) as err:
            fit(value, tp, "x")
        assert err.value.path == where


def test_literals_of_enum_members_and_of_mixed_kinds() -> None:
    # an enum member in a Literal travels as its value and comes back as the member
    assert fit("pro", Literal[Tier.PRO], "t") is Tier.PRO
    assert fit(2, Literal[Level.HIGH, "none"], "t") is Level.HIGH
    # true is not 1 and 1 is not true, but each is accepted where the Literal lists it
    assert fit(True, Literal[1, True], "l") is True
    assert fit(1, Literal[1, True], "l") == 1 and fit(1, Literal[1, True], "l") is not True
    for value, tp in [("free", Literal[Tier.PRO]), (False, Literal[0, 1]), (1, Literal[True])]:
        with pytest.raises(Mismatch):
            fit(value, tp, "l")

    @task("lit:enum")
    def pick(tier: Literal[Tier.PRO], flag: Literal[1, True]) -> None: ...
    payload = pick.to_task(Tier.PRO, True).payload
    assert payload == b'{"tier":"pro","flag":true}'
    assert pick.decode(payload) == {"tier": Tier.PRO, "flag": True}


def test_newtype_typeddict_and_namedtuple_annotations() -> None:
    @task("t:shapes")
    def ship(user: UserId, shipment: Shipment, at: Point, maybe: UserId | None = None) -> None: ...

    payload = ship.to_task(UserId(7), {"carrier": "dhl", "weight": 2}, Point(1, "a")).payload
    assert payload == b'{"user":7,"shipment":{"carrier":"dhl","weight":2},"at":[1,"a"]}'
    assert ship.decode(payload) == {"user": 7, "shipment": {"carrier": "dhl", "weight": 2}, "at": Point(1, "a")}
    assert ship.decode(b'{"user":7,"shipment":{"carrier":"x","extra":1},"at":[2]}')["at"] == Point(2, "")
    for payload, field in [(b'{"user":"7","shipment":{"carrier":"x"},"at":[1]}', "user"),
                           (b'{"user":7,"shipment":{"weight":1},"at":[1]}', "shipment.carrier"),  # Required
                           (b'{"user":7,"shipment":{"carrier":"x","weight":"1"},"at":[1]}', "shipment.weight"),
                           (b'{"user":7,"shipment":[],"at":[1]}', "shipment"),
                           (b'{"user":7,"shipment":{"carrier":"x"},"at":[1,"a",3]}', "at"),
                           (b'{"user":7,"shipment":{"carrier":"x"},"at":["1"]}', "at[0]")]:
        with pytest.raises(PayloadMismatch) as err:
            ship.decode(payload)
        assert err.value.field == field, payload
    with pytest.raises(InvalidArgumentError) as bad:
        ship.to_task(UserId(1), {"weight": 1}, Point(1))
    assert bad.value.argument == "shipment" and "carrier" in str(bad.value)


def test_a_type_that_refuses_isinstance_is_a_mismatch_not_a_type_error() -> None:
    class Sized(Protocol):  # not runtime_checkable: isinstance raises TypeError
        def size(self) -> int: ...

    with pytest.raises(Mismatch) as err:
        fit([1], Sized, "x")
    assert err.value.path == "x"


def test_a_nested_type_whose_annotations_do_not_resolve_is_refused_when_decorated() -> None:
    with pytest.raises(InvalidArgumentError) as err:
        @task("t:broken")
        def uses(items: list[Broken]) -> None: ...
    assert err.value.argument == "items"
    assert "Broken" in str(err.value) and "Nowhere" in str(err.value)


def test_a_method_of_a_class_body_is_refused_and_bound_or_static_ones_work() -> None:
    mux = ServeMux()
    with pytest.raises(InvalidArgumentError, match=r"Mailer.send is a method \('self'") as err:
        class Mailer:
            @mux.task("m:self")
            def send(self, to: str) -> None: ...
    assert err.value.argument == "fn"
    with pytest.raises(InvalidArgumentError, match="'cls' cannot travel"):
        class Registry:
            @classmethod
            @mux.task("m:cls")
            def add(cls, name: str) -> None: ...
    assert mux.resolve("m:self") is None and mux.resolve("m:cls") is None

    class Sender:
        def __init__(self) -> None:
            self.sent: list[str] = []

        def send(self, to: str) -> None:
            self.sent.append(to)

        @mux.task("m:static")
        @staticmethod
        def ping(n: int) -> int:
            return n

    sender = Sender()
    bound = mux.task("m:bound")(sender.send)  # the instance stays in this process; the payload is {"to": ...}
    assert bound.to_task("a@b").payload == b'{"to":"a@b"}'
    assert Sender.ping.to_task(3).payload == b'{"n":3}'
    assert run_task(mux, bound.to_task("a@b")).outcome == "success" and sender.sent == ["a@b"]
    assert run_task(mux, Sender.ping.to_task(3)).value == 3


def test_null_for_a_slice_map_or_bytes_reads_as_empty_as_go_writes_a_nil_one() -> None:
    # type Report struct { Tags []string; Counts map[string]int; Blob []byte }, all nil: json.Marshal writes
    # {"tags":null,"counts":null,"blob":null}, which json.Unmarshal reads back as empty
    @task("go:nil")
    def report(tags: list[str], counts: dict[str, int], blob: bytes, ids: set[int], raw: list,
               note: list[str] | None = None) -> None: ...
    payload = b'{"tags":null,"counts":null,"blob":null,"ids":null,"raw":null,"note":null}'
    assert report.decode(payload) == {"tags": [], "counts": {}, "blob": b"", "ids": set(), "raw": [], "note": None}
    with pytest.raises(Mismatch, match="expected an array, got null"):  # a fixed-length tuple has no empty form
        fit(None, tuple[int, str], "pair")


def test_enqueue_with_a_client_of_the_wrong_kind_or_none_is_refused_and_writes_nothing(redis_url: str,
                                                                                         r: redis.Redis) -> None:
    _, t = make_mux()
    welcome = t["welcome"]
    with pytest.raises(InvalidArgumentError, match=r"takes a Client .* not AsyncClient .*enqueue_async") as err:
        welcome.enqueue(AsyncClient(redis_url), "a@b")  # type: ignore[arg-type]  # was a coroutine, never awaited
    assert err.value.argument == "client"
    with pytest.raises(InvalidArgumentError, match="takes a Client as its first argument, not str"):
        welcome.enqueue("ada@example.com")  # type: ignore[arg-type]  # the client forgotten

    async def wrong_async() -> None:
        with Client(redis_url) as client:
            await welcome.enqueue_async(client, "a@b")  # type: ignore[arg-type]  # was: enqueued, then TypeError
    with pytest.raises(InvalidArgumentError, match=r"takes an AsyncClient .* not Client"):
        run_async(wrong_async())
    assert r.llen(keys.pending("critical")) == 0


def test_a_pydantic_model_with_aliases_travels_by_its_aliases() -> None:
    @task("p:alias")
    def greet(who: GoStyle) -> None: ...
    payload = greet.to_task(GoStyle(user_id=7, display_name="Ada")).payload  # refused before: userId missing
    assert payload == b'{"who":{"userId":7,"displayName":"Ada"}}'
    assert greet.decode(payload) == {"who": GoStyle(user_id=7, display_name="Ada")}


def test_received_task_parameter_is_filled_by_the_worker_not_the_payload(redis_url: str) -> None:
    mux = ServeMux()
    seen: list[tuple[str, int, str]] = []

    @mux.task("with:task")
    def job(n: int, task: ReceivedTask) -> None:
        seen.append((task.type, n, task.id))

    assert job.to_task(n=1).payload == b'{"n":1}'
    with pytest.raises(InvalidArgumentError) as err:
        job.to_task(n=1, task="x")
    assert err.value.argument == "task"
    with Client(redis_url) as client:
        info = job.enqueue(client, 7)
    with running(redis_url, mux):
        wait_for(lambda: seen, what="the handler call")
    assert seen == [("with:task", 7, info.id)]


def test_worker_runs_sync_and_async_typed_tasks_with_converted_arguments(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    got: list[Any] = []
    lock = threading.Lock()

    @mux.task("typed:sync", queue="critical", max_retry=3)
    def sync_job(when: datetime, amount: Decimal, ids: list[UUID], tier: Tier = Tier.FREE) -> None:
        with lock:
            got.append(("sync", when, amount, ids, tier, threading.current_thread() is threading.main_thread()))

    @mux.task("typed:async")
    async def async_job(customer: Customer, address: Address) -> None:
        with lock:
            got.append(("async", customer, address))

    when = datetime(2026, 5, 4, 3, 2, 1, tzinfo=UTC)
    cust = Customer(id=ID, email="ada@example.com", since=date(2021, 7, 1))
    with Client(redis_url) as client:
        info = sync_job.enqueue(client, when, Decimal("0.10"), [ID], tier=Tier.PRO)

        async def produce() -> None:
            async with AsyncClient(redis_url) as ac:
                await async_job.enqueue_async(ac, customer=cust, address=Address("Rome", [Line("s", 1)]))
        run_async(produce())
    assert (info.queue, info.max_retry, info.type) == ("critical", 3, "typed:sync")
    with running(redis_url, mux, queues={"critical": 1, "default": 1}):
        wait_for(lambda: len(got) == 2, what="two typed calls")
    by_kind = {g[0]: g for g in got}
    assert by_kind["sync"][1:5] == (when, Decimal("0.10"), [ID], Tier.PRO)
    assert by_kind["sync"][5] is False  # a plain function runs in a worker thread, as handlers do
    assert by_kind["async"][1:] == (cust, Address("Rome", [Line("s", 1)]))
    assert r.get(keys.processed_total("critical")) == b"1" and r.get(keys.failed_total("critical")) is None


def test_a_payload_missing_a_required_field_is_archived_on_the_first_attempt(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    calls: list[str] = []

    @mux.task("email:welcome", max_retry=25)
    def send_welcome(to: str) -> None:
        calls.append(to)

    from asynqpy import Task
    with Client(redis_url) as client:  # an old producer that sent another shape
        info = client.enqueue(Task("email:welcome", b'{"email":"ada@example.com"}'), max_retry=25)
    with running(redis_url, mux):
        wait_for(lambda: r.zcard(keys.archived("default")) == 1, what="the task archived")
    assert calls == []
    msg = decode_task_message(r.hget(keys.task(info.queue, info.id), "msg"))
    assert msg.retried == 0
    assert "to: required argument is missing" in msg.error_msg and "send_welcome()" in msg.error_msg
    assert r.hget(keys.task(info.queue, info.id), "state") == TaskState.ARCHIVED.value.encode()


def test_nothing_is_written_when_arguments_do_not_fit(redis_url: str, r: redis.Redis) -> None:
    _, t = make_mux()
    with Client(redis_url) as client, pytest.raises(InvalidArgumentError):
        t["welcome"].enqueue(client, too="x")
    assert r.keys("*") == []


def test_a_prefix_match_is_not_run_by_a_typed_task(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    calls: list[int] = []

    @mux.task("report:deliver")
    def deliver(report_id: int) -> None:
        calls.append(report_id)

    from asynqpy import Task
    with Client(redis_url) as client:
        info = client.enqueue(Task("report:deliver:v3", b'{"report_id": 1}'))
    with running(redis_url, mux):
        wait_for(lambda: r.zcard(keys.retry("default")) == 1, what="the task retried")
    assert calls == []
    msg = decode_task_message(r.hget(keys.task("default", info.id), "msg"))
    assert msg.error_msg == 'handler not found for task "report:deliver:v3"'


def test_registry_and_call_form() -> None:
    _, t = make_mux()
    assert registered("email:welcome") is t["welcome"]
    assert registered("nope:nope") is None
    assert describe("email:welcome", b'{"to":"ada@example.com"}') == "send_welcome(to='ada@example.com')"
    assert describe("email:welcome", b"[1]") is None
    assert describe("nope:nope", b'{"to":"x"}') is None
    long = describe("email:welcome", json.dumps({"to": "a" * 60, "name": "b" * 30}).encode(), pretty=True)
    assert long == f"send_welcome(\n    to='{'a' * 60}',\n    name='{'b' * 30}',\n)"

    mux0, t0 = make_mux()
    with pytest.raises(InvalidArgumentError):  # the mux refuses a second handler: the registry keeps the first
        mux0.task("email:welcome")(lambda to: None)
    assert registered("email:welcome") is t0["welcome"]
    assert t0["welcome"].__name__ == "send_welcome" and t0["welcome"].__module__ == __name__

    @task("producer:only")
    def produce_only(x: int) -> None: ...
    assert registered("producer:only") is produce_only
    mux = ServeMux()
    mux.handle("producer:only", produce_only)  # a TypedTask made elsewhere registers its decoding handler
    assert mux.resolve("producer:only") is not produce_only


def test_works_without_pydantic_installed() -> None:
    code = (
        "import sys; sys.modules['pydantic'] = None\n"
        "from datetime import date\n"
        "from asynqpy import ServeMux\n"
        "mux = ServeMux()\n"
        "@mux.task('t:x')\n"
        "def f(d: date, n: int = 1) -> None: ...\n"
        "p = f.to_task(date(2020, 1, 2)).payload\n"
        "assert f.decode(p) == {'d': date(2020, 1, 2)}, p\n"
        "print(p.decode())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '{"d":"2020-01-02"}'
