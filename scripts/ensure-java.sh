#!/usr/bin/env bash
# ansible-rulebook evaluates rules in Drools (drools_jpy), which needs a Java 17+ runtime.
# Installs Debian's headless JRE when `java` is missing or older, then prints the JAVA_HOME
# to export (drools_jpy finds `java` on PATH too). Idempotent and quiet.
set -euo pipefail

java_major() {
  command -v java > /dev/null 2>&1 || { echo 0; return; }
  java -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $2; exit}' |
    cut -d. -f1
}

if [ "$(java_major)" -lt 17 ] 2> /dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "ensure-java.sh: Java 17+ is needed by ansible-rulebook; install openjdk-17-jre-headless" >&2
    exit 1
  fi
  {
    apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless
  } > /tmp/ensure-java.log 2>&1 || { cat /tmp/ensure-java.log >&2; exit 1; }
fi
[ "$(java_major)" -ge 17 ] || { echo "ensure-java.sh: java is still older than 17" >&2; exit 1; }
dirname "$(dirname "$(readlink -f "$(command -v java)")")"
