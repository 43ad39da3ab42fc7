"""LLM SDKs' sync clients, model and registry loaders, and slow-on-purpose CPU work on the
loop: the sync OpenAI / Anthropic clients through their resource attributes, pint's
registry, pysnmp's engine, Whisper / sentence-transformers models, docling's converter,
bcrypt / argon2 / passlib password hashes and hashlib's key derivation. The async clients,
the constructors that load nothing, and the fast hashes stay clean; a value typed by a
generic annotation (``Popen[bytes]``, ``queue.Queue[int]``) is an instance of its class."""

import hashlib
import queue
import subprocess

import anthropic
import bcrypt
import pint
from argon2 import PasswordHasher
from docling.document_converter import DocumentConverter
from faster_whisper import WhisperModel
from openai import AsyncOpenAI, OpenAI
from passlib.context import CryptContext
from pysnmp.hlapi.asyncio import SnmpEngine
from sentence_transformers import SentenceTransformer


class Assistant:
    def __init__(self) -> None:
        self.llm = OpenAI(api_key="k")
        self.aio = AsyncOpenAI(api_key="k")
        self.claude = anthropic.Anthropic()

    async def answer(self, question: str) -> str:
        reply = self.llm.chat.completions.create(model="m", messages=[])  # error: COB106
        await self.aio.chat.completions.create(model="m", messages=[])
        for chunk in self.llm.responses.create(model="m", input=question, stream=True):  # error: COB106
            print(chunk)
        self.claude.messages.create(model="m", max_tokens=1, messages=[])  # error: COB106
        return str(reply)


async def embed(client: OpenAI, text: str) -> object:
    return client.embeddings.create(input=text, model="m")  # error: COB106


async def start() -> None:
    units = pint.UnitRegistry()  # error: COB100
    engine = SnmpEngine()  # error: COB100
    model = WhisperModel("base")  # error: COB100
    segments, _ = model.transcribe("a.wav")  # error: COB109
    converter = DocumentConverter()
    converter.convert("a.pdf")  # error: COB100
    encoder = SentenceTransformer("all-MiniLM-L6-v2")  # error: COB100
    encoder.encode(["x"])  # error: COB109
    print(units, engine, segments)


def check_password(password: bytes, hashed: bytes) -> bool:
    return bcrypt.checkpw(password, hashed)


async def login(password: bytes, hashed: bytes) -> bool:
    return check_password(password, hashed)  # error: COB110 [medium]


async def register(password: str, salt: bytes) -> tuple[bytes, str, str, bytes]:
    digest = hashlib.sha256(salt).hexdigest()
    stored = bcrypt.hashpw(password.encode(), bcrypt.gensalt())  # error: COB109
    argon = PasswordHasher().hash(password)  # error: COB109
    legacy = CryptContext(schemes=["bcrypt"]).hash(password)  # error: COB109
    key = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 600_000)  # error: COB109
    return stored, argon + digest, legacy, key


def spawn(cmd: list[str]) -> subprocess.Popen[bytes] | None:
    return subprocess.Popen(cmd) if cmd else None


async def run(cmd: list[str], jobs: queue.Queue[int]) -> None:
    proc = spawn(cmd)  # error: COB110 [medium]
    if proc is not None:
        proc.wait()  # error: COB103
    jobs.get()  # error: COB108
