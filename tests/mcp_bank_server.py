"""A real MCP server for the tests (the `mcp` package's FastMCP, streamable HTTP).

    python tests/mcp_bank_server.py PORT

Its one tool appends each transfer to <folder>/transfer.log, so a test counts calls.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP

server = FastMCP("bank", host="127.0.0.1", port=int(sys.argv[1]), log_level="WARNING")


@server.tool()
def transfer(folder: str, amount: int) -> str:
    """Transfer money."""
    with (Path(folder) / "transfer.log").open("a") as fh:
        fh.write(f"{amount}\n")
    return f"transferred {amount}"


if __name__ == "__main__":
    server.run(transport="streamable-http")
