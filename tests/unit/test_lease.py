from seawall.locks import _lease


def test_renewal_comes_at_a_third_of_the_ttl() -> None:
    assert _lease.renew_at(100.0, 3.0) == 101.0


def test_lease_deadline_counts_from_the_send() -> None:
    assert _lease.lease_deadline(10.0, 2.0) == 12.0


def test_retry_never_goes_past_the_deadline() -> None:
    assert _lease.retry_at(10.0, 1.0, 10.05) == 10.05
    assert _lease.retry_at(10.0, 1.0, 20.0) == 10.1
    assert _lease.retry_at(10.0, 0.01, 20.0) == 10.0 + _lease.MIN_RETRY


def test_wait_slice_ends_when_the_holder_would_expire() -> None:
    assert abs(_lease.wait_slice(250, None) - 0.251) < 1e-9
    assert _lease.wait_slice(60_000, None) == _lease.MAX_WAIT_SLICE
    assert _lease.wait_slice(-1, None) == _lease.MAX_WAIT_SLICE  # key without expiry
    assert _lease.wait_slice(250, 0.1) == 0.1
    assert _lease.wait_slice(250, 0.0) == 0.0
