import sqlite3

import asyncpg
import psycopg2
import pymysql


async def positives(dsn: str) -> None:
    conn = sqlite3.connect(dsn)  # error: COB105
    conn.execute("select 1")  # error: COB105
    psycopg2.connect(dsn)  # error: COB105
    pymysql.connect(host=dsn)  # error: COB105
    with sqlite3.connect(dsn) as c2:  # error: COB105
        c2.commit()  # error: COB105


async def negatives(dsn: str) -> None:
    pool = await asyncpg.create_pool(dsn)
    await pool.fetch("select 1")
