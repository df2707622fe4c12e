# shellcheck shell=bash
# nothing to change
