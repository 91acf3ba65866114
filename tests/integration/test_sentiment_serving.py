"""The sentiment .mar in a real TorchServe over REST, with token auth, compared with the handler's
own predictor in this process. Concurrent requests make TorchServe form batches; the handler's
`x-batch-size` response header shows that they did."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.support.predictions import assert_same_prediction

pytestmark = pytest.mark.integration

PATH = "/predictions/sentiment"
REVIEWS = [
    "A wonderful, moving film with superb acting.",
    "Dull plot, wooden dialogue; I walked out.",
    "not bad",
    "The cinematography was stunning but the story dragged on far too long in the middle.",
    "meh",
    "One of the best movies I have seen this year, funny and smart.",
    "Terrible. Just terrible.",
    "It was fine, I guess?",
]


def post_json(served, body) -> requests.Response:
    return served.post(PATH, json=body)


def post_raw(served, data: bytes, content_type: str) -> requests.Response:
    return served.post(PATH, data=data, headers={"Content-Type": content_type})


def test_single_text_matches_the_in_process_prediction(served):
    r = post_json(served, {"text": REVIEWS[0]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"label", "probabilities", "uncertainty", "truncated", "model"}
    assert body["label"] in ("negative", "positive")
    assert body["model"]["name"] == "sentiment"
    assert body["model"]["version"] == served.sentiment_predictor.settings.version
    assert body["uncertainty"]["samples"] == served.sentiment_predictor.settings.mc_samples
    assert_same_prediction(body, served.sentiment_predictor.predict([REVIEWS[0]])[0])


def test_text_plain_body_is_accepted(served):
    r = post_raw(served, REVIEWS[1].encode(), "text/plain; charset=utf-8")
    assert r.status_code == 200, r.text
    assert_same_prediction(r.json(), served.sentiment_predictor.predict([REVIEWS[1]])[0])


def test_texts_field_answers_a_list_in_order(served):
    r = post_json(served, {"texts": REVIEWS[:3]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert isinstance(body, list) and len(body) == 3
    for got, want in zip(body, served.sentiment_predictor.predict(REVIEWS[:3]), strict=True):
        assert_same_prediction(got, want)


def test_long_text_is_truncated_and_flagged(served):
    max_length = served.sentiment_predictor.settings.max_length
    text = "great acting and a fine story " * max_length
    r = post_json(served, {"text": text})
    assert r.status_code == 200, r.text
    assert r.json()["truncated"] is True
    assert_same_prediction(r.json(), served.sentiment_predictor.predict([text])[0])


def test_concurrent_requests_are_batched_and_each_gets_its_own_answer(served):
    texts = [f"{REVIEWS[i % len(REVIEWS)]} ({i})" for i in range(32)]
    with ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(lambda t: post_json(served, {"text": t}), texts))
    assert [r.status_code for r in responses] == [200] * len(texts)
    sizes = [int(r.headers["x-batch-size"]) for r in responses]
    assert max(sizes) > 1, f"TorchServe never batched: {sizes}"
    for r, want in zip(responses, served.sentiment_predictor.predict(texts), strict=True):
        assert_same_prediction(r.json(), want)


BAD_REQUESTS = [
    pytest.param(
        json.dumps({"text": ""}).encode(), "application/json", "text is empty", id="empty"
    ),
    pytest.param(
        json.dumps({"text": " \n\t "}).encode(),
        "application/json",
        "text is empty",
        id="whitespace",
    ),
    pytest.param(b"\xff\xfe\xfa", "text/plain", "not valid UTF-8", id="non-utf8"),
    pytest.param(b'{"text": "good"', "application/json", "not valid JSON", id="bad-json"),
    pytest.param(b'{"text": 3}', "application/json", "must be a string", id="wrong-type"),
    pytest.param(b'{"review": "good"}', "application/json", 'needs a "text"', id="missing-field"),
    pytest.param(b'{"texts": []}', "application/json", "empty list", id="empty-texts"),
    pytest.param(b"[1, 2]", "application/json", "must be an object", id="array-body"),
]


@pytest.mark.parametrize(("data", "content_type", "reason"), BAD_REQUESTS)
def test_bad_input_gets_400_with_a_json_reason(served, data, content_type, reason):
    r = post_raw(served, data, content_type)
    assert r.status_code == 400, r.text
    assert reason in r.json()["error"]


def test_text_over_the_byte_limit_gets_400_and_too_many_texts_too(served):
    settings = served.sentiment_predictor.settings
    r = post_json(served, {"text": "x" * (settings.max_text_bytes + 1)})
    assert r.status_code == 400 and "the limit is" in r.json()["error"]
    r = post_json(served, {"texts": ["ok"] * (settings.max_texts + 1)})
    assert r.status_code == 400 and f"the limit is {settings.max_texts}" in r.json()["error"]


def test_body_over_max_request_size_is_refused_by_torchserve(served):
    r = post_raw(served, b"x" * (1 << 21), "text/plain")
    assert r.status_code == 413


def test_bad_request_batched_with_good_ones_does_not_fail_them(served):
    def call(i: int) -> tuple[int, requests.Response]:
        body = {"text": ""} if i % 4 == 0 else {"text": REVIEWS[i % len(REVIEWS)]}
        return i, post_json(served, body)

    for _ in range(
        3
    ):  # until a bad request has shared a batch with good ones (almost always at once)
        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(call, range(24)))
        for i, r in results:
            if i % 4 == 0:
                assert r.status_code == 400 and r.json()["error"] == "text is empty"
            else:
                assert r.status_code == 200, r.text
                want = served.sentiment_predictor.predict([REVIEWS[i % len(REVIEWS)]])[0]
                assert_same_prediction(r.json(), want)
        if any(i % 4 == 0 and int(r.headers["x-batch-size"]) > 1 for i, r in results):
            return
    pytest.fail("no bad request was ever batched with good ones")


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer not-the-key"}], ids=["missing", "wrong"]
)
def test_requests_without_the_inference_token_are_refused(served, headers):
    r = requests.post(
        f"{served.inference_url}{PATH}", json={"text": "good"}, headers=headers, timeout=30
    )
    assert r.status_code == 400
    assert r.json()["type"] == "InvalidKeyException"


def test_management_key_is_not_an_inference_key(served):
    r = served.post(PATH, key="management", json={"text": "good"})
    assert r.status_code == 400 and r.json()["type"] == "InvalidKeyException"


def test_json_sent_as_a_form_gets_415_and_form_fields_are_read(served):
    # `curl -d '{"text": ...}'` labels JSON as a url-encoded form; TorchServe drops it before the handler.
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    r = served.post(PATH, data=b'{"text": "good"}', headers=form)
    assert r.status_code == 415 and "application/json" in r.json()["error"]
    r = served.post(PATH, data={"text": REVIEWS[2]})
    assert r.status_code == 200, r.text
    assert_same_prediction(r.json(), served.sentiment_predictor.predict([REVIEWS[2]])[0])
    r = served.post(PATH, files={"data": (None, REVIEWS[2])})
    assert r.status_code == 200, r.text
    assert_same_prediction(r.json(), served.sentiment_predictor.predict([REVIEWS[2]])[0])
