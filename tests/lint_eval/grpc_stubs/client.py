"""Calls of a generated stub's methods: on a sync channel each waits for the answer (a
guess, medium: the same stub wraps a grpc.aio channel); awaited, async-iterated or handed
to gather, the stub is on an aio channel and nothing blocks."""

import asyncio

import grpc

from tests.lint_eval.grpc_stubs.greeter_pb2_grpc import GreeterStub


class Client:
    def __init__(self, target: str) -> None:
        self.stub = GreeterStub(grpc.insecure_channel(target))
        self.aio = GreeterStub(grpc.aio.insecure_channel(target))

    async def hello(self, request: object) -> object:
        reply = self.stub.SayHello(request)  # error: COB102 [medium]
        for feature in self.stub.ListFeatures(request):  # error: COB102 [medium]
            print(feature)
        return reply

    async def hello_aio(self, request: object) -> object:
        reply = await self.aio.SayHello(request)
        async for feature in self.aio.ListFeatures(request):
            print(feature)
        both = await asyncio.gather(self.aio.SayHello(request), self.aio.SayHello(request))
        return reply, both


def log(stub: GreeterStub, request: object) -> None:
    stub.SayHello(request)


async def consume(stub: GreeterStub, request: object) -> None:
    log(stub, request)  # error: COB110 [medium]
