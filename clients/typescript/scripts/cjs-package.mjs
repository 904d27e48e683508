// Marks dist/cjs as CommonJS: the package's "type" is "module", so without
// this Node (and TypeScript's node16 resolution) would read dist/cjs/*.js
// and its .d.ts files as ES modules. Run by `npm run build` after tsc.
import { writeFileSync } from "node:fs";

writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), JSON.stringify({ type: "commonjs" }) + "\n");
