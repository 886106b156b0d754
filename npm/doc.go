// Package npm is the npm distribution: the bir-proxy package (package.json, README.md
// and the launcher bin/bir-proxy.js) and the six platform packages under platforms/
// that scripts/release fills with the release binaries and packs. Its test installs
// the packed tarballs with npm and runs the launcher; docs/install.md says how the
// packages are made and why.
//
// The package has no code of its own outside its tests.
package npm
