import boto3
import redis
import redis.asyncio


class Uploader:
    # its users build it in coroutines (a class with async methods): low confidence
    def __init__(self) -> None:  # error: COB110
        self.s3 = boto3.client("s3")
        self.cache = redis.Redis()
        self.acache = redis.asyncio.Redis()

    async def upload(self, key: str, body: bytes) -> str:
        self.s3.put_object(Bucket="b", Key=key, Body=body)  # error: COB106
        self.cache.get(key)  # error: COB106
        await self.acache.get(key)
        return self.s3.generate_presigned_url("get_object")


async def make_client() -> None:
    boto3.client("s3")  # error: COB106
