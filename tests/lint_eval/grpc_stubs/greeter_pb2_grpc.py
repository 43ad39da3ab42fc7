"""The shape protoc's grpc plugin generates: each method an attribute of the stub."""


class GreeterStub:
    def __init__(self, channel):
        self.SayHello = channel.unary_unary("/Greeter/SayHello")
        self.ListFeatures = channel.unary_stream("/Greeter/ListFeatures")
