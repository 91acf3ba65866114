"""The per-batch work budget: who runs, who gets a fast 503."""

from handlers.budget import Overloaded, admit, over_budget


def test_requests_run_in_order_while_the_budget_lasts():
    assert admit([100, 200, 300, 50], budget=350) == [True, True, False, True]


def test_the_first_request_of_a_batch_always_runs_even_over_budget():
    assert admit([10_000, 1], budget=100) == [True, False]


def test_refused_requests_cost_nothing_and_are_not_admitted():
    assert admit([None, 500, None, 600], budget=1000) == [False, True, False, False]
    assert admit([None, 5000], budget=100) == [False, True]


def test_over_budget_is_a_503_that_says_when_to_retry():
    err = over_budget(8192)
    assert isinstance(err, Overloaded)
    assert err.status == 503 and err.retry_after_s >= 1
    assert err.to_body()["kind"] == "overloaded"
    assert "8192" in err.to_body()["error"]
