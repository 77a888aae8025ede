// Runs a Python program under CPython 3.14 compiled to WebAssembly (the npm package
// `pyodide`), for benchmarks/oracles.py. Usage:
//     node benchmarks/oracle_pyodide.js PYODIDE_PACKAGE_DIR < request.json > reply.json
// The request is {"code": "<python source defining main(payload)>", "payload": ...} as ASCII
// JSON; the reply is the JSON of main(payload). The JSON text is handed to Python unparsed, so
// lone surrogates (escaped as \udXXX) reach Python intact.
"use strict";
const path = require("path");

async function main() {
  const dir = process.argv[2];
  if (!dir) throw new Error("usage: node oracle_pyodide.js PYODIDE_PACKAGE_DIR");
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const request = Buffer.concat(chunks).toString("utf8");
  const { loadPyodide } = require(path.resolve(dir));
  const py = await loadPyodide({ stdout: () => {}, stderr: () => {} });
  py.globals.set("_REQUEST_JSON", request);
  const reply = py.runPython(`
import json as _json
_req = _json.loads(_REQUEST_JSON)
_ns = {"__name__": "__oracle__"}
exec(compile(_req["code"], "<oracle>", "exec"), _ns)
_json.dumps(_ns["main"](_req["payload"]))
`);
  process.stdout.write(reply);
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
