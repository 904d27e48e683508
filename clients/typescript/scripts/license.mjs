// Copies the repository's LICENSE into the package before `npm pack` (npm
// packs only files inside the package directory, and skips symlinks). The
// repository's LICENSE stays the one copy that is edited; the copy here is
// git-ignored. Packing from a directory that is no checkout (an unpacked
// tarball) keeps the LICENSE it already has; with neither, packing fails.
import { copyFileSync, existsSync } from "node:fs";

const repo = new URL("../../../LICENSE", import.meta.url);
const here = new URL("../LICENSE", import.meta.url);
if (existsSync(repo)) {
  copyFileSync(repo, here);
} else if (!existsSync(here)) {
  console.error("@toolgate/client: no LICENSE: neither ../../LICENSE (the repository's) nor ./LICENSE exists");
  process.exit(1);
}
