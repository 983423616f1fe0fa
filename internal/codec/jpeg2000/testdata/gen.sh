#!/bin/sh
# Regenerates the JPEG 2000 test code streams from the synthetic sources in
# this directory with OpenJPEG (apt-get install libopenjp2-tools), and the
# OpenJPEG decodings of the lossy ones (*.ref.pgm/ppm). Lossless streams are
# checked against their source; lossy ones against opj_decompress.
set -e
cd "$(dirname "$0")"
python3 - <<'PY'
import random, struct
random.seed(7)
def img(w, h, c, maxv, name, signed=False, raw=False):
    px = []
    for y in range(h):
        for x in range(w):
            for k in range(c):
                v = (x * 37 + y * 23 + k * 11) * maxv // (w * 37 + h * 23 + 22)
                if (x // 8 + y // 5) % 3 == 0:
                    v = maxv - v
                v += random.randint(-maxv // 16 - 1, maxv // 16 + 1)
                if x == y or x == w - 1 - y:
                    v = maxv if k != 1 else 0
                v = max(0, min(maxv, v))
                if signed:
                    v -= (maxv + 1) // 2
                px.append(v)
    if raw:
        with open(name, 'wb') as f:
            f.write(b''.join(struct.pack('>h' if signed else '>H', v) for v in px))
        return
    with open(name, 'wb') as f:
        f.write(b'P%d\n%d %d\n%d\n' % (6 if c == 3 else 5, w, h, maxv))
        if maxv < 256:
            f.write(bytes(px))
        else:
            f.write(b''.join(struct.pack('>H', v) for v in px))
img(67, 53, 1, 255, 'g8.pgm')
img(67, 53, 1, 4095, 'g12.pgm')
img(40, 33, 1, 65535, 'g16.pgm')
img(45, 37, 3, 255, 'rgb8.ppm')
with open('b2.raw', 'wb') as f:
    f.write(bytes(((x // 3 + y // 2) % 2) ^ (x == y) for y in range(29) for x in range(31)))
img(38, 27, 1, 4095, 's12.raw', signed=True, raw=True)
img(40, 30, 1, 65535, 's16.raw', signed=True, raw=True)
img(40, 30, 3, 255, 'sub.raw', raw=True)
PY
rm -f *.j2k *.jp2 *.ref.*
e() { out=$1; shift; opj_compress "$@" -o "$out" >/tmp/opj.log 2>&1 || { cat /tmp/opj.log; echo "failed: $out"; exit 1; }; }
# Lossless (5/3): checked against the source.
e ll_g8_default.j2k -i g8.pgm
e ll_g8_n1.j2k -i g8.pgm -n 1
e ll_g8_n4.j2k -i g8.pgm -n 4
e ll_g8_cb16x4.j2k -i g8.pgm -b 16,4
e ll_g8_cb4x32.j2k -i g8.pgm -b 4,32
e ll_g8_prec.j2k -i g8.pgm -c [16,16],[8,8],[4,4] -b 4,4 -n 3
e ll_g8_tiles.j2k -i g8.pgm -t 16,16 -n 3
e ll_g8_tiles_off.j2k -i g8.pgm -t 20,17 -d 5,3 -T 2,1 -n 3
e ll_g8_offset.j2k -i g8.pgm -d 7,11
for p in LRCP RLCP RPCL PCRL CPRL; do
  e ll_g8_layers_$p.j2k -i g8.pgm -r 30,10,1 -p $p -c [16,16],[8,8] -b 4,4 -n 3
done
for m in 1 2 4 8 16 32 63 5 33; do
  e ll_g8_mode$m.j2k -i g8.pgm -M $m -r 20,5,1
done
e ll_g8_sop_eph.j2k -i g8.pgm -SOP -EPH -r 4,1
e ll_g8_sop_eph_prec.j2k -i g8.pgm -SOP -EPH -c [16,16] -b 8,8 -n 4
e ll_g8_plt_tlm.j2k -i g8.pgm -PLT -TLM -t 32,32 -n 4 -TP R -C "radgen test"
e ll_g8_poc.j2k -i g8.pgm -r 20,1 -POC T0=0,0,1,2,1,RLCP/T0=0,0,2,6,1,LRCP
e ll_g8_roi.j2k -i g8.pgm -ROI c=0,U=4
e ll_g12.j2k -i g12.pgm -n 5 -b 8,8
e ll_g16.j2k -i g16.pgm
e ll_g16_layers.j2k -i g16.pgm -r 8,3,1 -p RPCL
e ll_b2.j2k -i b2.raw -F 31,29,1,2,u -n 2
e ll_rgb8_mct.j2k -i rgb8.ppm
e ll_rgb8_nomct.j2k -i rgb8.ppm -mct 0
e ll_rgb8_cprl_tiles.j2k -i rgb8.ppm -t 16,16 -p CPRL -r 10,1 -c [8,8] -b 4,4 -SOP -n 3
e ll_rgb8.jp2 -i rgb8.ppm
e ll_s12.j2k -i s12.raw -F 38,27,1,12,s -n 4
e ll_s16.j2k -i s16.raw -F 40,30,1,16,s -n 4 -b 16,16
e ll_sub.j2k -i sub.raw -F 40,30,3,8,u@1x1:2x2:2x1 -mct 0 -n 3
# Lossy: checked against opj_decompress within a small tolerance.
e ly_g8_r10.j2k -i g8.pgm -I -r 10
e ly_g8_layers.j2k -i g8.pgm -I -r 40,10,4 -p PCRL -M 63
e ly_g12_q.j2k -i g12.pgm -I -q 45 -t 32,32 -n 4
e ly_g16_r.j2k -i g16.pgm -I -r 6 -n 4
e ly_rgb8_ict.j2k -i rgb8.ppm -I -r 8
e ly_rgb8.jp2 -i rgb8.ppm -I -r 12 -p RPCL
e ly_g8_53r.j2k -i g8.pgm -r 12
e ly_g8_roi.j2k -i g8.pgm -I -r 15 -ROI c=0,U=6
e ly_g8_tiles_off.j2k -i g8.pgm -I -r 8 -t 20,17 -d 5,3 -T 2,1 -n 3
e ly_g8_prec_sop.j2k -i g8.pgm -I -r 10,3 -c [16,16],[8,8] -b 8,8 -n 4 -SOP -EPH -p RLCP
e ly_g8_bypass.j2k -i g8.pgm -I -r 12,4 -M 1
e ly_rgb8_cprl.j2k -i rgb8.ppm -I -r 10 -p CPRL -t 16,16 -n 3
e ly_s12.j2k -i s12.raw -F 38,27,1,12,s -n 4 -I -r 6
e ly_sub.j2k -i sub.raw -F 40,30,3,8,u@1x1:2x2:2x1 -mct 0 -n 3 -I -r 5
for f in ly_*.j2k ly_*.jp2; do
  case $f in *rgb*) ext=ppm ;; *_s12*) ext=raw ;; *_sub*) ext=pgx ;; *) ext=pgm ;; esac
  opj_decompress -quiet -i "$f" -o "${f%.*}.ref.$ext" >/dev/null 2>&1
done
