#!/usr/bin/env bash
# System packages the test suite uses, installed when missing (idempotent):
# - Chromium: the HTML report is checked in a real headless browser, and chromium-driver (its
#   chromedriver, the same version) drives the problems view through Selenium;
# - TeX Live (pdflatex with booktabs, array, longtable, geometry, graphicx: texlive-latex-base
#   and texlive-latex-recommended) and poppler-utils (pdftoppm, pdffonts, pdftotext): the
#   LaTeX report is compiled and its first page rendered;
# - InfiBench unit-test toolchains that install quickly: Go, Boost headers for g++, and the
#   global npm packages jsdom and TypeScript 5.6 (7.x removed --outFile, which the grader uses).
#   R is not installed: its tests need the CRAN package `assert`, which Debian does not carry
#   (those questions are reported as toolchain-missing; docker/sandbox.Dockerfile has the full set).
# A part that cannot be installed is reported; the tests that need it skip with a reason.
set -uo pipefail

apt_need=()
command -v chromium >/dev/null || apt_need+=(chromium)
command -v chromedriver >/dev/null || apt_need+=(chromium-driver)
command -v go >/dev/null || apt_need+=(golang-go)
[ -d /usr/include/boost ] || apt_need+=(libboost-dev)
command -v pdflatex >/dev/null || apt_need+=(texlive-latex-base)
kpsewhich booktabs.sty >/dev/null 2>&1 || apt_need+=(texlive-latex-recommended)
command -v pdftoppm >/dev/null || apt_need+=(poppler-utils)
if [ ${#apt_need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "ci: apt-get install ${apt_need[*]}" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${apt_need[@]}" >/dev/null; } \
      || echo "ci: could not install ${apt_need[*]}" >&2
  else
    echo "ci: not root or no apt-get: ${apt_need[*]} not installed" >&2
  fi
fi

npm_root=$(npm root -g 2>/dev/null || true)
if command -v npm >/dev/null; then
  npm_need=()
  [ -d "$npm_root/jsdom" ] || npm_need+=(jsdom@29.1.1)
  tsc --version 2>/dev/null | grep -q "Version 5.6" || npm_need+=(typescript@5.6.3)
  if [ ${#npm_need[@]} -gt 0 ]; then
    echo "ci: npm install -g ${npm_need[*]}" >&2
    npm install -g --silent "${npm_need[@]}" >/dev/null 2>&1 \
      || echo "ci: could not install ${npm_need[*]}" >&2
  fi
fi
exit 0
