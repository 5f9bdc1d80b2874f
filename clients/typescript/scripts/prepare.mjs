// The package's prepare script: builds dist/src from src with the
// package's own devDependency typescript, so that `npm install
// ./clients/typescript` (which links the checkout and runs prepare in it)
// gives an importable package. When typescript is not installed in the
// package yet (an install from another project does not install a linked
// package's devDependencies), it is installed first from
// package-lock.json, with scripts off: from npm's cache, or the registry.
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(root, "package.json"));

function findTsc() {
  try {
    return require.resolve("typescript/bin/tsc");
  } catch {
    return null;
  }
}

let tsc = findTsc();
if (tsc === null) {
  // npm_execpath is npm's own script when npm runs this; "npm" otherwise.
  const npm = process.env.npm_execpath;
  const args = ["ci", "--ignore-scripts", "--include=dev", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"];
  if (npm && npm.endsWith(".js")) {
    execFileSync(process.execPath, [npm, ...args], { cwd: root, stdio: "inherit" });
  } else {
    execFileSync("npm", args, { cwd: root, stdio: "inherit", shell: process.platform === "win32" });
  }
  tsc = findTsc();
  if (tsc === null) {
    console.error("@continuumdb/client: typescript is still missing after npm ci in " + root);
    process.exit(1);
  }
}
execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { cwd: root, stdio: "inherit" });
