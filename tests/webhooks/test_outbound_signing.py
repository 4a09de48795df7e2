"""The Standard Webhooks signature: the specification's test vector, the reference code's own
signature of the same message, and several secrets during a rotation."""

from __future__ import annotations

import datetime

from standardwebhooks import Webhook as Reference

from webhooks.outbound import signing

# The specification's vector (standard-webhooks, the reference libraries' tests).
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MESSAGE_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'
EXPECTED = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_specifications_test_vector() -> None:
    assert signing.sign(secret=SECRET, message_id=MESSAGE_ID, timestamp=TIMESTAMP, body=BODY) == (
        EXPECTED
    )


def test_the_reference_code_signs_the_same() -> None:
    secret = signing.new_secret()
    at = datetime.datetime.fromtimestamp(TIMESTAMP, tz=datetime.UTC)
    reference = Reference(secret).sign(MESSAGE_ID, at, BODY.decode())
    ours = signing.sign(secret=secret, message_id=MESSAGE_ID, timestamp=TIMESTAMP, body=BODY)
    assert ours == reference


def test_a_rotation_signs_with_each_secret_space_separated() -> None:
    old, new = signing.new_secret(), signing.new_secret()
    headers = signing.headers(secrets=[new, old], message_id=MESSAGE_ID, timestamp=1, body=BODY)
    assert headers["webhook-id"] == MESSAGE_ID
    assert headers["webhook-timestamp"] == "1"
    assert headers["webhook-signature"].split(" ") == [
        signing.sign(secret=s, message_id=MESSAGE_ID, timestamp=1, body=BODY) for s in (new, old)
    ]


def test_a_new_secret_is_whsec_and_32_random_bytes() -> None:
    secret = signing.new_secret()
    assert secret.startswith("whsec_")
    assert len(signing._key(secret)) == signing.SECRET_BYTES
    assert secret != signing.new_secret()
