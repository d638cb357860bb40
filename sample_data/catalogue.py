"""The demo project's tests: ids, suites, owners and the story each one plays."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD")
WINDOWS = ("1h", "6h", "12h", "1d", "3d", "7d", "14d", "30d", "90d", "180d", "365d", "ytd")
BILLING_PARENT = "tests/billing/test_rollup.py::test_billing_rollup"

UNIT = ("unit", "nightly")
INTEGRATION = ("integration", "nightly")
NIGHTLY_ONLY = ("nightly",)

# (file, suites, [function names]); the billing family is added from CURRENCIES x WINDOWS.
_MODULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("tests/billing/test_rollup.py", UNIT, ("test_rollup_empty_month",)),
    (
        "tests/billing/test_invoice.py",
        UNIT,
        (
            "test_invoice_totals",
            "test_invoice_saved",
            "test_invoice_credit_note",
        ),
    ),
    (
        "tests/billing/test_tax.py",
        UNIT,
        (
            "test_vat_rounding_half_even",
            "test_vat_reverse_charge",
            "test_tax_exempt_customer",
        ),
    ),
    (
        "tests/api/test_orders.py",
        UNIT,
        (
            "test_order_total_includes_discount",
            "test_order_persists",
            "test_order_cancel_refunds",
            "test_order_idempotency_key",
        ),
    ),
    (
        "tests/api/test_auth.py",
        UNIT,
        (
            "test_login_ok",
            "test_token_refresh",
            "test_logout_revokes_session",
            "test_sso_saml_roundtrip",
        ),
    ),
    (
        "tests/api/test_webhooks.py",
        UNIT,
        (
            "test_webhook_retry_backoff",
            "test_webhook_signature_valid",
        ),
    ),
    (
        "tests/api/test_rate_limit.py",
        UNIT,
        ("test_burst_limit_per_token", "test_rate_limit_headers"),
    ),
    (
        "tests/storage/test_db.py",
        UNIT,
        (
            "test_transaction_isolation",
            "test_pool_exhaustion",
            "test_migrations_apply_cleanly",
        ),
    ),
    (
        "tests/storage/test_cache.py",
        UNIT,
        (
            "test_cache_eviction_under_pressure",
            "test_cache_invalidate_on_write",
            "test_cache_ttl",
        ),
    ),
    (
        "tests/storage/test_bulk_import.py",
        UNIT,
        (
            "test_bulk_import_large_csv",
            "test_bulk_import_dedup",
        ),
    ),
    (
        "tests/search/test_query.py",
        UNIT,
        (
            "test_query_uses_db_cache",
            "test_query_phrase",
            "test_query_unicode_collation",
        ),
    ),
    (
        "tests/search/test_ranking.py",
        UNIT,
        (
            "test_rank_boosts_recent",
            "test_rank_ties_stable",
        ),
    ),
    (
        "tests/notifications/test_email.py",
        UNIT,
        (
            "test_digest_sends_once",
            "test_email_template_renders",
        ),
    ),
    ("tests/notifications/test_sms.py", UNIT, ("test_sms_length_split",)),
    (
        "tests/integration/test_checkout_flow.py",
        INTEGRATION,
        (
            "test_checkout_happy_path",
            "test_checkout_declined_card",
            "test_checkout_3ds_challenge",
            "test_checkout_guest",
        ),
    ),
    (
        "tests/integration/test_inventory_sync.py",
        INTEGRATION,
        (
            "test_inventory_sync_eventually_consistent",
            "test_inventory_reserve_release",
            "test_inventory_low_stock_alert",
        ),
    ),
    (
        "tests/integration/test_search_cluster.py",
        INTEGRATION,
        ("test_reindex_preserves_aliases", "test_cluster_health"),
    ),
    (
        "tests/integration/test_payment_provider.py",
        INTEGRATION,
        ("test_provider_refund", "test_provider_webhook_roundtrip"),
    ),
    (
        "tests/e2e/test_full_export.py",
        NIGHTLY_ONLY,
        ("test_full_export_roundtrip", "test_export_resume_after_crash"),
    ),
    ("tests/e2e/test_load.py", NIGHTLY_ONLY, ("test_sustained_load_10min", "test_spike_recovery")),
)

# CODEOWNERS, GitHub syntax, last match wins (the file is written from this list).
CODEOWNERS_RULES: tuple[tuple[str, str], ...] = (
    ("*", "@acme/platform"),
    ("/tests/billing/", "@acme/billing"),
    ("/tests/billing/test_tax.py", "@farah-tax @acme/billing"),
    ("/tests/api/", "@acme/api"),
    ("/tests/storage/", "@acme/storage"),
    ("/tests/search/", "@acme/search"),
    ("/tests/notifications/", "@acme/growth"),
    ("/tests/integration/", "@acme/platform @acme/qa"),
    ("/tests/integration/test_search_cluster.py", "@acme/search"),
    ("/tests/e2e/", "@acme/qa"),
)


@dataclass(frozen=True, slots=True)
class TestDef:
    """One test of the demo project."""

    node_id: str
    suites: tuple[str, ...]
    base_ms: int  # typical duration

    @property
    def file(self) -> str:
        """The test's file path."""
        return self.node_id.split("::", 1)[0]

    @property
    def name(self) -> str:
        """The function name with params, as pytest's junitxml writes it."""
        return self.node_id.split("::", 1)[1]

    @property
    def classname(self) -> str:
        """The dotted module path, as pytest's junitxml writes it."""
        return self.file.removesuffix(".py").replace("/", ".")

    @property
    def line(self) -> int:
        """A stable fake line number."""
        return 10 + _stable_int(self.node_id) % 400


def _stable_int(text: str) -> int:
    """A process-independent integer from a string (hash() is salted per process)."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def billing_ids() -> list[str]:
    """The 84 params of the billing family, in declaration order."""
    return [f"{BILLING_PARENT}[currency-{c}-window-{w}]" for c in CURRENCIES for w in WINDOWS]


def build_catalogue() -> list[TestDef]:
    """Every test of the demo project, sorted by node id."""
    tests = [TestDef(node_id, UNIT, 40 + _stable_int(node_id) % 160) for node_id in billing_ids()]
    for file, suites, names in _MODULES:
        for name in names:
            node_id = f"{file}::{name}"
            slow = 4000 if suites == NIGHTLY_ONLY else 600 if suites == INTEGRATION else 0
            tests.append(TestDef(node_id, suites, slow + 20 + _stable_int(node_id) % 900))
    return sorted(tests, key=lambda t: t.node_id)


def codeowners_text() -> str:
    """The CODEOWNERS file of the demo project."""
    lines = ["# Demo project owners (GitHub CODEOWNERS syntax: the last matching rule wins)."]
    width = max(len(pattern) for pattern, _ in CODEOWNERS_RULES)
    lines += [f"{pattern.ljust(width)}  {owners}" for pattern, owners in CODEOWNERS_RULES]
    return "\n".join(lines) + "\n"
