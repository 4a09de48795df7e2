"""The provider's claims, and the faults the tests ask of it by client name: an ID token for
another audience (``wrong-aud``), already expired (``expired``), or from another issuer
(``wrong-iss``), each signed with the provider's real key."""

from __future__ import annotations

import time
from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator


class TestValidator(OAuth2Validator):
    oidc_claim_scope = {"sub": "openid", "email": "email", "email_verified": "email",
                        "name": "profile"}  # fmt: skip

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {"email": user.email, "email_verified": True, "name": user.get_full_name()}

    def get_id_token_dictionary(self, token: Any, token_handler: Any, request: Any) -> Any:
        claims, expiration_time = super().get_id_token_dictionary(token, token_handler, request)
        if request.client.name == "expired":
            claims["exp"] = int(time.time()) - 600
        if request.client.name == "wrong-iss":
            claims["iss"] = "http://127.0.0.1:9/o"
        return claims, expiration_time

    def finalize_id_token(self, id_token: dict[str, Any], *args: Any) -> Any:
        if args[-1].client.name == "wrong-aud":
            id_token["aud"] = "another-client"
        return super().finalize_id_token(id_token, *args)
