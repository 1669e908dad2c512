#!/bin/sh
# docs/validation.md table: kvplan validate MODEL --format json for every shipped model
echo "| model | mode | policy | K | V | context | predicted B | measured B | written B | peak B | RSS delta B | match |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for f in models/*.yaml; do
  n=$(basename $f .yaml); [ "$n" = gpus ] && continue
  j=$(./build/rel/kvplan validate $n --format json 2>&1)
  echo "$j" | python3 -c "import json,sys
d=json.load(sys.stdin); r=d['runs'][0]
print('| %s | %s (hidden %d) | %s | %s | %s | %d | %d | %d | %d | %d | %d | %s |'%(d['model'],r['mode'],d['scale_hidden'],d['policy'],d['k_dtype'],d['v_dtype'],r['context'],r['predicted_bytes'],r['measured_bytes'],r['written_bytes'],r['peak_bytes'],r['rss_delta_bytes'],'yes' if d['match'] else 'NO'))" || echo "| $n | error: $j |"
done
