"""The tabular kit (handlers/kits/tabular/) on a schema of its own (numbers, a category, an
optional feature): bodies in JSON and CSV, each schema violation a 400 naming the field and the
rule, the cost of a request before it runs, the encoding, and per-feature attributions.

`BAD_BODIES` and `assert_bad_inputs_refused` are what any tabular model inherits: the tests at the
end run them, and the batch's cost before it runs, over every registered model naming the tabular
kit (its tiny export), as tests/unit/test_image_kit.py does for the image kit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from handlers import budget, registry
from handlers.errors import (
    ArchiveError,
    BadEncoding,
    BadField,
    EmptyInput,
    Overloaded,
    RequestError,
    TooLarge,
)  # fmt: skip
from handlers.kits.tabular.explain import Attributor, log_odds
from handlers.kits.tabular.records import (
    answered,
    explanation_budget,
    read_records,
    records_budget,
    rows_of,
)
from handlers.kits.tabular.schema import Schema
from handlers.service import ModelService, Request
from tests.fixtures.served import handler_config
from tests.support import wire
from tools import registry as tools

COLUMNS = {
    "age": [20, 35, 50, 65],
    "income": [1.5, 2.0, 3.5, 5.0],
    "colour": ["red", "blue", "red", "green"],
    "height": [150.0, 160.0, 170.0, 180.0],
}
GOOD = {"age": 40, "income": 2.5, "colour": "blue", "height": 165.0}


@pytest.fixture(scope="module")
def schema() -> Schema:
    return Schema.learn(COLUMNS, optional=["height"])


def csv_request(text: str, ctype: str = "text/csv") -> Request:
    return Request(text.encode(), {"Content-Type": ctype})


def json_request(body) -> Request:
    return Request(json.dumps(body).encode(), {"Content-Type": "application/json"})


def first_name(schema: Schema) -> str:
    return next(f.name for f in schema.features if f.kind == "number" and f.required)


def BAD_BODIES(schema: Schema, example: dict) -> list[tuple[str, bytes, str, type, list[str]]]:
    """(case, body, content type, error class, words the reason must hold) for any schema and a
    valid record of it: each violation of the schema, and each malformed body."""
    name = first_name(schema)
    without = {k: v for k, v in example.items() if k != name}
    dumps = lambda v: json.dumps(v).encode()  # noqa: E731
    header = ",".join(f'"{k}"' for k in example)
    row = ",".join(str(v) for v in example.values())
    return [
        ("unknown field", dumps(example | {"bogus": 1}), "application/json", BadField, ["'bogus'", "not a feature"]),
        ("missing required", dumps(without), "application/json", BadField, [repr(name), "required"]),
        ("text for a number", dumps(example | {name: "abc"}), "application/json", BadField, [repr(name), "finite number"]),
        ("text that is no number", dumps(example | {name: "1.5.2"}), "application/json", BadField, [repr(name), "finite number, not '1.5.2'"]),
        ("bool for a number", dumps(example | {name: True}), "application/json", BadField, [repr(name), "finite number"]),
        ("number past floats", f'{{"{name}": 1{"0" * 400}}}'.encode(), "application/json", BadField, [repr(name), "finite number"]),
        ("NaN", dumps(without)[:-1] + f', "{name}": NaN}}'.encode(), "application/json", BadField, [repr(name), "finite number"]),
        ("list of records", dumps([example]), "application/json", BadField, ["records"]),
        ("empty records", dumps({"records": []}), "application/json", BadField, ["non-empty"]),
        ("a record that is a list", dumps({"records": [[1, 2]]}), "application/json", BadField, ["record 0", "object"]),
        ("bad JSON", b'{"a": ', "application/json", BadEncoding, ["JSON"]),
        ("CSV header only", header.encode(), "text/csv", EmptyInput, ["header"]),
        ("CSV ragged row", f"{header}\n{row},9".encode(), "text/csv", BadField, ["row 1", "cells"]),
        ("CSV inf", f"{header}\n{row}".replace(str(example[name]), "inf", 1).encode(), "text/csv", BadField, ["finite number"]),
        ("CSV NUL", f"{header}\n{row}\x00".encode(), "text/csv", BadField, ["finite number"]),
        ("CSV not UTF-8", b"\xff\xfe" + header.encode(), "text/csv", BadEncoding, ["UTF-8"]),
    ]  # fmt: skip


def assert_bad_inputs_refused(parse, schema: Schema, example: dict) -> None:
    """`parse(Request)` refuses every BAD_BODIES case with its error, naming the field and rule."""
    for case, body, ctype, error, words in BAD_BODIES(schema, example):
        with pytest.raises(error) as info:
            parse(Request(body, {"Content-Type": ctype}))
        assert all(w in info.value.reason for w in words), (case, info.value.reason)
        assert info.value.status == 400, case


def test_the_kits_bad_inputs_are_refused_with_the_field_and_the_rule(schema):
    assert_bad_inputs_refused(lambda r: read_records(r, schema, 16), schema, GOOD)


def test_a_schema_learns_types_ranges_categories_and_optional_features(schema):
    by = {f.name: f for f in schema.features}
    assert (by["age"].kind, by["age"].low, by["age"].high, by["age"].mean) == (
        "number",
        20,
        65,
        42.5,
    )
    assert by["colour"].kind == "category" and by["colour"].categories == ("blue", "green", "red")
    assert by["colour"].default == "red"
    assert by["height"].required is False and by["age"].required is True
    assert Schema.from_block(json.loads(json.dumps(schema.to_block()))) == schema


@pytest.mark.parametrize(
    "block",
    [
        {"features": []},
        {"features": [{"name": "a", "type": "date"}]},
        {"features": [{"name": "a", "type": "number", "low": 2, "high": 1, "mean": 1}]},
        {"features": [{"name": "a", "type": "category", "categories": ["x"], "default": "y"}]},
        {"features": [{"name": "a", "type": "number", "low": 0, "high": 1, "mean": 0}] * 2},
    ],
    ids=["empty", "unknown type", "low above high", "default not seen", "named twice"],
)
def test_a_bad_schema_fails_the_load(block):
    with pytest.raises(ArchiveError):
        Schema.from_block(block)


def test_every_violation_of_a_record_is_named_in_one_refusal(schema):
    with pytest.raises(BadField) as info:
        read_records(json_request({"age": "old", "colour": "purple", "extra": 1}), schema, 16)
    reason = info.value.reason
    for words in ("'extra' is not a feature", "'age' must be a finite number, not 'old'",
                  "'income' is required", "'colour' must be one of ['blue', 'green', 'red'], not 'purple'"):  # fmt: skip
        assert words in reason, reason
    assert "height" not in reason  # optional


def test_one_record_many_records_and_csv_read_the_same(schema):
    one = read_records(json_request(GOOD), schema, 16)
    many = read_records(json_request({"records": [GOOD, GOOD]}), schema, 16)
    csv = read_records(
        csv_request("age,income,colour,height\n40,2.5,blue,165\n40,2.5,blue,165\n"), schema, 16
    )
    plain = read_records(
        csv_request("age,income,colour,height\n40,2.5,blue,165", "text/plain"), schema, 16
    )
    assert (one.many, many.many, csv.many, plain.many) == (False, True, True, True)
    assert one.rows[0] == many.rows[1] == csv.rows[1] == plain.rows[0]
    assert np.array_equal(schema.encode(many.rows), schema.encode(csv.rows))


def test_a_number_may_come_as_its_text_as_from_a_table_read_as_text(schema):
    [row] = read_records(json_request(GOOD | {"age": " 40 ", "income": "2.5e0"}), schema, 16).rows
    assert (row["age"], row["income"]) == (40.0, 2.5)


def test_a_missing_optional_feature_takes_its_training_mean(schema):
    record = {k: v for k, v in GOOD.items() if k != "height"}
    [row] = read_records(json_request(record), schema, 16).rows
    assert row["height"] == 165.0  # the mean of 150..180
    [cell] = read_records(csv_request("age,income,colour,height\n40,2.5,blue,"), schema, 16).rows
    assert cell["height"] == 165.0


def test_more_records_than_the_limit_are_refused_before_they_are_checked(schema):
    junk = {"records": [{"nonsense": i} for i in range(5)]}
    with pytest.raises(TooLarge, match="5 records; the limit is 4"):
        read_records(json_request(junk), schema, 4)
    with pytest.raises(TooLarge):
        read_records(csv_request("a\n" + "x\n" * 5), schema, 4)


def test_more_records_than_the_limit_as_tensors_are_refused_from_their_size(schema, monkeypatch):
    """The tensor form counts its records from the tensors' sizes: past the limit it is refused
    with the JSON body's message before any element is read or any record built."""
    from handlers.kits.tabular import records

    def no_reading(*args):
        raise AssertionError("an element was read before the count was checked")

    monkeypatch.setattr(records, "texts", no_reading)
    tensors = {"colour": np.array([b"red"] * 5, dtype=object), "age": np.arange(5.0)}
    with pytest.raises(TooLarge, match="5 records; the limit is 4"):
        records.Records.from_tensors(tensors, schema, 4)


def test_the_cost_of_a_request_is_known_before_it_runs(schema):
    records = read_records(json_request({"records": [GOOD] * 3}), schema, 16)
    assert records.cost == 3
    assert Attributor(schema, lambda x: x).passes() == 4 + 1
    assert Attributor(schema, lambda x: x, "shapley", 8).passes() == 4 * 8 + 1


def test_numbers_are_encoded_within_their_training_range_and_clipped_past_it(schema):
    far = GOOD | {"age": 1e300, "income": -1e300}
    x = schema.encode([GOOD, far])
    assert x.shape == (2, schema.width) == (2, 6)
    assert x[0, 0] == pytest.approx((40 - 20) / 45)
    assert (x[1, 0], x[1, 1]) == (2.0, -1.0)  # margin 1: one range past it
    assert x[0, 2:5].tolist() == [1.0, 0.0, 0.0]  # blue, one-hot
    assert schema.out_of_range(far) == ["age", "income"] and schema.out_of_range(GOOD) == []


def test_attributions_are_per_feature_over_the_forward_pass(schema):
    """On a linear score, leave-one-feature-out gives each feature weight . (x - baseline) over
    its columns: a category's one-hot columns count as one feature."""
    w = np.array([[1.0, -2.0, 0.5, 0.25, -1.0, 3.0]])
    scores = lambda x: np.concatenate([-(x @ w.T), x @ w.T], axis=1)  # noqa: E731
    x = schema.encode([GOOD])[0]
    values, evaluations = Attributor(schema, scores).attribute(x, target=1)
    diff = (x - schema.baseline()) * w[0]
    assert list(values) == ["age", "income", "colour", "height"]
    assert values["age"] == pytest.approx(diff[0]) and values["income"] == pytest.approx(diff[1])
    assert values["colour"] == pytest.approx(diff[2:5].sum()) and values["height"] == pytest.approx(
        0
    )
    assert evaluations == Attributor(schema, scores).passes()


def test_log_odds_are_each_label_against_the_rest():
    z = np.array([[0.0, 2.0, -1.0]])
    p = np.exp(z / 2) / np.exp(z / 2).sum()
    assert log_odds(z, 2.0)[0] == pytest.approx(np.log(p / (1 - p))[0])


def test_a_refusal_is_a_request_error_never_another_exception(schema):
    for body in (b"\x00\x01", b"[]", b"1", b'"x"', b"{}", b"null"):
        with pytest.raises(RequestError):
            read_records(Request(body, {"Content-Type": "application/json"}), schema, 16)


def test_a_batch_past_its_record_budget_refuses_the_rest_before_running(schema):
    three = read_records(json_request({"records": [GOOD] * 3}), schema, 16)
    admitted = budget.apply([three, three, three], [records_budget(7)])
    rows = rows_of(admitted)
    assert admitted[:2] == [three, three] and isinstance(admitted[2], Overloaded)
    assert len(rows) == 6  # one runtime call for what was admitted
    answers = answered(admitted, [{"i": i} for i in range(6)])
    assert answers[1].rows == ({"i": 3}, {"i": 4}, {"i": 5}) and answers[2] is admitted[2]
    assert json.loads(answers[0].reply().body) == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_explanations_are_priced_in_record_passes_before_they_run(schema):
    three = read_records(json_request({"records": [GOOD] * 3}), schema, 16)
    refused = budget.apply([three], [explanation_budget(5, 14, 100)])
    assert all(isinstance(r, TooLarge) for r in refused)
    out = budget.apply([three, three], [explanation_budget(5, 15, 20)])
    assert out[0] is three and isinstance(out[1], Overloaded)


def test_a_field_nested_past_repr_depth_is_a_bad_field_not_a_500(schema):
    """Found by the surface fuzzing: quoting a 1000-deep list in the reason overflowed repr()."""
    good = json.dumps({k: v for k, v in GOOD.items() if k != "age"})
    body = ('{"age": ' + "[" * 1000 + "]" * 1000 + ", " + good[1:]).encode()
    with pytest.raises(BadField, match="nested too deep"):
        read_records(Request(body, {"Content-Type": "application/json"}), schema, 16)


TABULAR_MODELS = [s.name for s in registry.MODELS if "tabular" in s.kits]


def test_the_kit_has_models():
    assert "tabular" in TABULAR_MODELS


@pytest.fixture(scope="module", params=TABULAR_MODELS)
def served_model(request) -> ModelService:
    """Each registered model naming the tabular kit, as its archive serves it (its tiny export)."""
    artifacts = request.getfixturevalue(f"{request.param}_artifacts")
    config = handler_config(request.param) | {"threads": 1}
    return ModelService.from_dir(artifacts, name=request.param, config=config)


def test_every_tabular_model_refuses_the_kits_bad_inputs_beside_answered_neighbours(served_model):
    """What any model of the kit inherits: each bad body a 400 naming the field and the rule,
    the same from the whole lifecycle, its neighbours answered."""
    model = served_model.model
    example = tools.get(served_model.model.name).example()
    assert_bad_inputs_refused(model.parse, model.schema, example)
    good = Request(json.dumps(example).encode(), {"Content-Type": "application/json"})
    for case, body, ctype, error, _ in BAD_BODIES(model.schema, example):
        results = served_model.handle_batch([good, Request(body, {"Content-Type": ctype}), good])
        assert isinstance(results[1], error) and results[1].status == 400, case
        assert results[0].body == results[2].body and json.loads(results[0].body)["label"]


def test_every_tabular_model_prices_a_batch_before_it_runs(served_model):
    """Past the model's record budget a request gets 503 before any inference; the first request
    of a batch always runs."""
    settings = served_model.model.settings
    example = tools.get(served_model.model.name).example()
    per = min(settings.max_records, settings.max_batch_records)
    body = json.dumps({"records": [example] * per}).encode()
    h = {"Content-Type": "application/json"}
    calls = []
    inference = served_model.model.inference
    served_model.model.inference = lambda batch: calls.append(batch) or inference(batch)
    try:
        n = settings.max_batch_records // per + 1
        results = served_model.handle_batch([Request(body, h) for _ in range(n)])
    finally:
        served_model.model.inference = inference
    assert isinstance(results[-1], Overloaded) and results[-1].status == 503
    assert not any(isinstance(r, RequestError) for r in results[:-1])
    assert len(calls) == 1


def test_every_tabular_models_typed_forms_round_trip_and_an_oip_infer_does_no_json(
    served_model, monkeypatch
):
    """The kit's typed request and answer (records.Records, records.Answers): the JSON, tensor
    and row forms carry the same values, and the OIP contract path (tensors → typed request → the
    worker → tensors) parses and writes no JSON at all."""
    from handlers.kits.tabular.records import Answers, Records
    from oip.contract import Contract
    from tests.support.json_calls import json_calls

    model = served_model.model
    example = tools.get(model.name).example()
    records = [example, example]
    kinds = {f.name: f.kind for f in model.schema.features}
    columns = {n: [r[n] for r in records] for n in example}
    arrays = {
        n: np.array([str(v).encode() for v in c], dtype=object)
        if kinds[n] == "category"
        else np.array(c, np.float64)
        for n, c in columns.items()
    }
    typed = Records.from_tensors(arrays, model.schema)
    assert wire.request_json(typed) == {"records": json.loads(json.dumps(records))}
    [answer] = served_model.handle_batch([Request(None, typed=typed)], write=lambda a: a)
    assert isinstance(answer, Answers)
    [reply] = served_model.handle_batch([json_request({"records": records})])
    assert wire.read_answer(Answers, reply.body) == answer and answer.reply().body == reply.body
    assert answer.to_row() == json.loads(reply.body)

    contract = Contract(model.name, model.settings)
    items = [
        type("Input", (), {"name": n, "datatype": "BYTES" if kinds[n] == "category" else "FP64",
                           "shape": [2], "data": [str(v) if kinds[n] == "category" else v
                                                  for v in c]})
        for n, c in columns.items()
    ]  # fmt: skip
    with json_calls(monkeypatch) as calls:
        request = contract.request(contract.read_inputs(items), {}, "r1", explain=False)
        [outputs] = served_model.handle_batch([request], contract.write)
    assert not calls, calls
    assert request.body is None and isinstance(request.typed, Records)
    want = answer.to_tensors(model.settings.export.classes)
    assert [o.name for o in outputs] == [o.name for o in want]
    for got, expected in zip(outputs, want, strict=True):
        assert got.datatype == expected.datatype and np.array_equal(got.data, expected.data)
