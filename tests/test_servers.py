"""The real servers the suite's tests rely on are reachable (fails in CI if not)."""

from __future__ import annotations


def test_redis_answers(redis_url):
    import redis

    r = redis.Redis.from_url(redis_url)
    assert r.ping()
    r.close()


def test_postgres_answers(pg_dsn):
    import psycopg

    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
