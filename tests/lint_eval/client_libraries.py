"""Sync client libraries on the loop: the stdlib's mail, file-transfer and RPC clients,
dnspython's sync resolver, paho-mqtt, zeep, pika's BlockingConnection, boto3 / botocore
sessions, PyJWKClient, Slack's sync WebClient, SQLAlchemy's sync session and engine, and
psycopg_pool's sync pool, pyserial and pyserial-asyncio (whose coroutines open the port
before they first suspend); their async counterparts and the calls that only queue work
stay clean."""

import configparser
import ftplib
import selectors
import smtplib
import xmlrpc.client
from email.message import EmailMessage

import boto3
import dns.asyncresolver
import dns.resolver
import jwt
import paho.mqtt.client as mqtt
import pika
import serial
import serial_asyncio
import serial_asyncio_fast
import zeep
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from slack_sdk import WebClient
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session


async def send_mail(msg: EmailMessage) -> None:
    server = smtplib.SMTP("mail.example.com", 587)  # error: COB102
    server.starttls()  # error: COB102
    server.send_message(msg)  # error: COB102


async def upload(path: str) -> None:
    with ftplib.FTP("ftp.example.com") as ftp:  # error: COB102
        ftp.login()  # error: COB102


async def rpc() -> object:
    proxy = xmlrpc.client.ServerProxy("http://localhost:8000/")
    return proxy.pow(2, 3)  # error: COB101


async def settings(paths: list[str]) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read_string("[a]\nb = 1\n")
    parser.read(paths)  # error: COB100
    return parser


async def ready(sel: selectors.BaseSelector) -> None:
    sel.select(timeout=0)
    selector = selectors.DefaultSelector()
    selector.select()  # error: COB102


async def lookup(name: str) -> list[str]:
    answers = dns.resolver.resolve(name, "A")  # error: COB102
    resolver = dns.asyncresolver.Resolver()  # error: COB100
    quiet = dns.asyncresolver.Resolver(configure=False)
    quiet.nameservers = ["127.0.0.1"]
    more = await resolver.resolve(name, "AAAA")
    return [str(a) for a in answers] + [str(a) for a in more]


class Bridge:
    def __init__(self, host: str) -> None:
        self._client = mqtt.Client()
        self._host = host

    async def start(self) -> None:
        self._client.tls_set(ca_certs="/etc/ssl/ca.pem")  # error: COB106
        self._client.connect(self._host, 8883)  # error: COB106
        self._client.loop_start()

    async def send(self, topic: str, payload: bytes) -> None:
        self._client.publish(topic, payload)  # queued for paho's network thread
        self._client.loop(timeout=0)


async def soap(wsdl: str) -> object:
    client = zeep.AsyncClient(wsdl)  # error: COB106
    return await client.service.Ping()


async def publish(body: bytes) -> None:
    connection = pika.BlockingConnection(pika.ConnectionParameters("localhost"))  # error: COB106
    channel = connection.channel()  # error: COB106
    channel.basic_publish(exchange="", routing_key="q", body=body)  # error: COB106


async def credentials() -> object:
    session = boto3.Session(profile_name="dev")
    return session.get_credentials()  # error: COB106


async def invoke(body: bytes, given: boto3.Session | None = None) -> None:
    session = given or boto3.Session(region_name="us-east-1")
    runtime = session.client("sagemaker-runtime")  # error: COB106
    runtime.invoke_endpoint(EndpointName="model", Body=body)  # error: COB106


async def verify(token: str) -> dict[str, object]:
    keys = jwt.PyJWKClient("https://example.com/.well-known/jwks.json")
    key = keys.get_signing_key_from_jwt(token)  # error: COB101
    return jwt.decode(token, key.key, algorithms=["RS256"])


async def notify(text_: str) -> None:
    WebClient(token="x").chat_postMessage(channel="#ops", text=text_)  # error: COB106
    await AsyncWebClient(token="x").chat_postMessage(channel="#ops", text=text_)


async def list_users(db: Session) -> list[object]:
    db.add(object())
    return list(db.execute(text("select 1")))  # error: COB105


async def list_users_async(db: AsyncSession) -> list[object]:
    return list(await db.execute(text("select 1")))


engine = create_engine("postgresql://localhost/app")
pool = ConnectionPool("dbname=app", open=False)
apool = AsyncConnectionPool("dbname=app", open=False)


async def count() -> int:
    with engine.connect() as conn:  # error: COB105
        return conn.execute(text("select count(*) from t")).scalar_one()  # error: COB105


async def pooled() -> None:
    with pool.connection() as conn:  # error: COB105
        conn.execute("select 1")  # error: COB105
    async with apool.connection() as aconn:
        await aconn.execute("select 1")


async def open_port(loop, url: str) -> None:
    reader, writer = await serial_asyncio.open_serial_connection(url=url)  # error: COB100
    await serial_asyncio.create_serial_connection(loop, lambda: None, url)  # error: COB100
    await serial_asyncio_fast.open_serial_connection(url=url)
    port = serial.Serial("/dev/ttyUSB0", 9600)  # error: COB100
    port.readline()  # error: COB100


async def ask_model(prompt: str) -> str:
    import litellm

    reply = litellm.completion(model="gpt-4o", messages=[{"role": "user", "content": prompt}])  # error: COB106
    later = await litellm.acompletion(model="gpt-4o", messages=[])
    return str(reply) + str(later)
