# The data arrives in data/, as it would from an export.
set -e
mkdir -p data
mv sales.csv data/sales.csv
