import psycopg


def test_pg_server_is_reachable(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
