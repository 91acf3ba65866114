"""The REST side of `ModelClient`: TorchServe's inference and management HTTP APIs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import requests

from clients.client import Payload, decode_answer, encode_payload, with_token
from clients.errors import ConnectionFailed, from_http
from clients.settings import ClientSettings
from clients.tokens import TokenSource, bearer
from handlers.errors import REQUEST_ID_HEADER


class RestClient:
    protocol = "rest"

    def __init__(self, settings: ClientSettings, tokens: TokenSource):
        self.settings = settings
        self.tokens = tokens
        self._session = requests.Session()  # keep-alive: one connection per client

    def predict(self, model: str, payload: Payload, version: str | None = None) -> Any:
        return self._call("predictions", model, payload, version)

    def explain(self, model: str, payload: Payload, version: str | None = None) -> Any:
        """The same body as `predict`, explained (POST /explanations/<model>)."""
        return self._call("explanations", model, payload, version)

    def _call(self, route: str, model: str, payload: Payload, version: str | None) -> Any:
        body, content_type = encode_payload(payload)
        path = f"/{route}/{model}" + (f"/{version}" if version else "")
        url = self.settings.inference_url + path
        return decode_answer(
            with_token(
                self.tokens,
                "inference",
                lambda key: self._send("POST", url, key, body, content_type),
            )
        )

    def post(
        self, model: str, body: bytes, headers: Mapping[str, str], version: str | None = None
    ) -> requests.Response:
        """POST a body with its own headers (float32 bodies, Accept, stream state) and return the
        whole response: a float32 answer's layout and a stream's state are in its headers."""
        path = f"/predictions/{model}" + (f"/{version}" if version else "")
        url = self.settings.inference_url + path
        return with_token(
            self.tokens, "inference", lambda key: self._request("POST", url, key, body, headers)
        )

    def health(self) -> dict:
        url = self.settings.inference_url + "/ping"
        return decode_answer(
            with_token(self.tokens, "inference", lambda key: self._send("GET", url, key))
        )

    def list_models(self) -> list[str]:
        url = self.settings.management_url + "/models"
        answer = decode_answer(
            with_token(self.tokens, "management", lambda key: self._send("GET", url, key))
        )
        return sorted(m["modelName"] for m in answer.get("models", []))

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> RestClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _send(
        self,
        method: str,
        url: str,
        key: str | None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> bytes:
        headers = {"Content-Type": content_type} if content_type else {}
        return self._request(method, url, key, body, headers).content

    def _request(
        self,
        method: str,
        url: str,
        key: str | None,
        body: bytes | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> requests.Response:
        headers = dict(extra or {})
        if auth := bearer(key):
            headers["Authorization"] = auth
        try:
            r = self._session.request(
                method, url, data=body, headers=headers, timeout=self.settings.timeout
            )
        except requests.RequestException as e:
            raise ConnectionFailed(f"{method} {url}: {e}", protocol=self.protocol) from e
        if r.status_code >= 400:
            raise from_http(
                r.status_code,
                r.content,
                r.reason or "",
                protocol=self.protocol,
                request_id=r.headers.get(REQUEST_ID_HEADER),
            )
        return r
