N=${NUMPROBE:-build/numprobe}
common="--backend emu --seq 4096..131072 --points 4096,8192,16384,32768,65536,131072 --queries 8 --heads 1 --kv-heads 1 --mask none --dtype f32 --kv-format e4m3fn --p-format e4m3fn --kv-scale head --rows all --no-default-bound"
for dist in ${DISTS:-normal diffuse constant-v}; do
  $N drift $common --dist $dist --csv ${OUTDIR:-.}/${dist}_fp32.csv > ${OUTDIR:-.}/${dist}_fp32.txt 2>&1
  $N drift $common --dist $dist --acc-model h200-wgmma-e4m3 --csv ${OUTDIR:-.}/${dist}_never.csv > ${OUTDIR:-.}/${dist}_never.txt 2>&1
  for p in 1 4 64; do
    $N drift $common --dist $dist --acc-model h200-wgmma-e4m3 --acc-promote $p --csv ${OUTDIR:-.}/${dist}_p$p.csv > ${OUTDIR:-.}/${dist}_p$p.txt 2>&1
  done
done
echo done > ${OUTDIR:-.}/DONE
