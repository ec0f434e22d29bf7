"""Signs one webhook delivery per scheme with the senders' own Python libraries and prints each
as a JSON line: {"scheme", "library", "headers", "body"}. Used by tests/suite/webhook_vendors.rs, which
sends them to the reference consumer. Usage: python sign.py SECRET

- standardwebhooks: Webhook(secret).sign(msg_id, timestamp, body), the Standard Webhooks reference
- svix: svix.webhooks.Webhook(secret).sign(...), Svix's own
- stripe: stripe.WebhookSignature.generate_signature_header(body, secret), then checked with
  stripe.Webhook.construct_event as a Stripe integration would
- slack_sdk: SignatureVerifier(secret).generate_signature(timestamp=…, body=…)
"""

import json
import sys
import uuid
from datetime import datetime, timezone
from importlib.metadata import version

import standardwebhooks.webhooks
import stripe
import svix.webhooks
from slack_sdk.signature import SignatureVerifier


def emit(scheme, library, headers, body):
    print(json.dumps({"scheme": scheme, "library": library, "headers": headers, "body": body}))


def main():
    secret = sys.argv[1]
    now = datetime.now(tz=timezone.utc)
    ts = str(int(now.timestamp()))

    for scheme, module, dist, prefix in [
        ("standard", standardwebhooks.webhooks, "standardwebhooks", "webhook"),
        ("svix", svix.webhooks, "svix", "svix"),
    ]:
        msg_id = f"msg_{uuid.uuid4().hex}"
        body = json.dumps({"type": "invoice.paid", "data": {"amount": 1250}})
        signature = module.Webhook(secret).sign(msg_id, now, body)
        # The library must accept what it signed (with its own header names).
        module.Webhook(secret).verify(
            body, {f"{prefix}-id": msg_id, f"{prefix}-timestamp": ts, f"{prefix}-signature": signature}
        )
        headers = {f"{prefix}-id": msg_id, f"{prefix}-timestamp": ts, f"{prefix}-signature": signature}
        emit(scheme, f"{dist} {version(dist)}", headers, body)

    body = json.dumps({"id": f"evt_{uuid.uuid4().hex}", "object": "event", "type": "invoice.paid"})
    header = stripe.WebhookSignature.generate_signature_header(body, secret)
    stripe.Webhook.construct_event(body, header, secret)
    emit("stripe", f"stripe {version('stripe')}", {"Stripe-Signature": header}, body)

    body = json.dumps({"type": "event_callback", "event_id": f"Ev{uuid.uuid4().hex}",
                       "event": {"type": "message", "text": "hi"}})
    verifier = SignatureVerifier(secret)
    signature = verifier.generate_signature(timestamp=ts, body=body)
    assert verifier.is_valid(body=body, timestamp=ts, signature=signature)
    emit("slack", f"slack_sdk {version('slack_sdk')}",
         {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature}, body)


main()
