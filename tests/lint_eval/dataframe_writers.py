"""pandas' writers write their file on the loop, on a frame the lint built, one a helper
returned, or an untyped one calling a writer no other type has (medium). Twins: no target
(``to_csv()`` returns the text), an in-memory buffer, and an awaited async writer."""
import io
from typing import Any

import pandas as pd


class Log:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)

    def dump(self, path: str) -> None:
        self.frame().to_csv(path, index=False)

    async def adump(self, path: str) -> None:
        self.dump(path)  # error: COB110


async def export(rows: list[dict[str, Any]], path: str, other: Any) -> str:
    df = pd.DataFrame(rows)
    df.to_parquet(path)  # error: COB100
    other.to_excel(path)  # error: COB100
    text = df.to_csv(index=False)
    buffer = io.StringIO()
    df.to_csv(buffer)
    await other.to_csv_async(path)
    return text + buffer.getvalue()
