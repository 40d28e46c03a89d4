// RUN: xdsl-opt %s -p math-approximate --split-input-file | filecheck %s
// RUN: xdsl-opt %s -p math-approximate --split-input-file | filecheck %s --check-prefix=GONE

// No math.tanh, math.erf or f32 math.exp is left before the last case (the one that keeps
// them).
// GONE-NOT: math.tanh
// GONE-NOT: math.erf
// GONE-NOT: math.exp
// GONE:     func.func @left_alone

// tanh: x clamped to [-9, 9] (nsz: the zero's sign comes from x * P / Q), then
// c P(c^2) / Q(c^2) (multiply-adds LLVM may fuse), and exactly +-1 where |x| >= 9, found as
// c^2 >= 81 and made as c * f32(1/9); a select, no branch, so the loop around it vectorises.
// CHECK-LABEL: func.func @tanh(
// CHECK-SAME:  %[[X:.*]]: f32) -> f32 {
// CHECK-NEXT:  %[[NINE:.*]] = arith.constant 9.000000e+00 : f32
// CHECK-NEXT:  %[[LOW:.*]] = arith.negf %[[NINE]] : f32
// CHECK-NEXT:  %[[A:.*]] = arith.maximumf %[[X]], %[[LOW]] fastmath<nsz> : f32
// CHECK-NEXT:  %[[C:.*]] = arith.minimumf %[[A]], %[[NINE]] fastmath<nsz> : f32
// CHECK-NEXT:  %[[Z:.*]] = arith.mulf %[[C]], %[[C]] fastmath<contract> : f32
// CHECK:       %[[P0:.*]] = arith.constant 0.99999994 : f32
// CHECK-NEXT:  %[[P:.*]] = arith.addf %{{.*}}, %[[P0]] fastmath<contract> : f32
// CHECK-NEXT:  %[[CP:.*]] = arith.mulf %[[C]], %[[P]] fastmath<contract> : f32
// CHECK:       %[[Q0:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:  %[[Q:.*]] = arith.addf %{{.*}}, %[[Q0]] fastmath<contract> : f32
// CHECK-NEXT:  %[[R:.*]] = arith.divf %[[CP]], %[[Q]] : f32
// CHECK-NEXT:  %[[EIGHTY_ONE:.*]] = arith.constant 8.100000e+01 : f32
// CHECK-NEXT:  %[[SAT:.*]] = arith.cmpf oge, %[[Z]], %[[EIGHTY_ONE]] : f32
// CHECK-NEXT:  %[[NINTH:.*]] = arith.constant 0.111111112 : f32
// CHECK-NEXT:  %[[SIGNED:.*]] = arith.mulf %[[C]], %[[NINTH]] fastmath<contract> : f32
// CHECK-NEXT:  %[[T:.*]] = arith.select %[[SAT]], %[[SIGNED]], %[[R]] : f32
// CHECK-NEXT:  func.return %[[T]] : f32
func.func @tanh(%x: f32) -> f32 {
  %0 = math.tanh %x : f32
  func.return %0 : f32
}

// -----

// erf: x clamped to [-4, 4], then x * P(x^2) / Q(x^2).
// CHECK-LABEL: func.func @erf(
// CHECK-SAME:  %[[X:.*]]: f32) -> f32 {
// CHECK:       %[[LOW:.*]] = arith.constant -4.000000e+00 : f32
// CHECK-NEXT:  %[[A:.*]] = arith.maximumf %[[X]], %[[LOW]] : f32
// CHECK-NEXT:  %[[HIGH:.*]] = arith.constant 4.000000e+00 : f32
// CHECK-NEXT:  %[[C:.*]] = arith.minimumf %[[A]], %[[HIGH]] : f32
// CHECK-NEXT:  %[[Z:.*]] = arith.mulf %[[C]], %[[C]] : f32
// CHECK:       %[[P:.*]] = arith.mulf %{{.*}}, %[[C]] : f32
// CHECK:       %[[R:.*]] = arith.divf %[[P]], %{{.*}} : f32
// CHECK-NEXT:  func.return %[[R]] : f32
func.func @erf(%x: f32) -> f32 {
  %0 = math.erf %x : f32
  func.return %0 : f32
}

// -----

// exp: x clamped above to 89 as `89 < x ? 89 : x` and below to -126 ln2 as
// `x < -87.34 ? -87.34 : x` (each keeps NaN and is one vminps/vmaxps), n = round(x / ln2) by
// adding 1.5 * 2^23 + 126 (0x4B40007E: t's low bits hold n + 126, 126 being the exponent
// bias less one), r = x - n ln2 in two steps, 2 exp(r) as a degree-5 polynomial by
// Horner's scheme (multiply-adds LLVM may fuse), times 2^(n-1), which is t's low bits
// shifted into the exponent, so exp(x > 88.72) overflows to inf in that product, and
// n = -126 (every x below -86.99) makes the scale, and the result, 0.
// CHECK-LABEL: func.func @exp(
// CHECK-SAME:  %[[X:.*]]: f32) -> f32 {
// CHECK-NEXT:  %[[LIMIT:.*]] = arith.constant 8.900000e+01 : f32
// CHECK-NEXT:  %[[OVER:.*]] = arith.cmpf olt, %[[LIMIT]], %[[X]] : f32
// CHECK-NEXT:  %[[XH:.*]] = arith.select %[[OVER]], %[[LIMIT]], %[[X]] : f32
// CHECK-NEXT:  %[[LOW:.*]] = arith.constant -87.3365479 : f32
// CHECK-NEXT:  %[[UNDER:.*]] = arith.cmpf olt, %[[XH]], %[[LOW]] : f32
// CHECK-NEXT:  %[[XC:.*]] = arith.select %[[UNDER]], %[[LOW]], %[[XH]] : f32
// CHECK-NEXT:  %[[ROUNDER:.*]] = arith.constant 0x4B40007E : f32
// CHECK-NEXT:  %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK-NEXT:  %[[XL:.*]] = arith.mulf %[[XC]], %[[LOG2E]] fastmath<contract> : f32
// CHECK-NEXT:  %[[T:.*]] = arith.addf %[[XL]], %[[ROUNDER]] fastmath<contract> : f32
// CHECK-NEXT:  %[[N:.*]] = arith.subf %[[T]], %[[ROUNDER]] : f32
// CHECK-NEXT:  %[[HIGH:.*]] = arith.constant 0.693359375 : f32
// CHECK-NEXT:  %[[NH:.*]] = arith.mulf %[[N]], %[[HIGH]] fastmath<contract> : f32
// CHECK-NEXT:  %[[R1:.*]] = arith.subf %[[XC]], %[[NH]] fastmath<contract> : f32
// CHECK:       %[[R:.*]] = arith.subf %[[R1]], %{{.*}} fastmath<contract> : f32
// CHECK-NEXT:  %[[A5:.*]] = arith.constant 0.0165806152 : f32
// CHECK-NEXT:  %[[M5:.*]] = arith.mulf %[[A5]], %[[R]] fastmath<contract> : f32
// CHECK-NEXT:  %[[A4:.*]] = arith.constant 0.0837959275 : f32
// CHECK-NEXT:  %[[P4:.*]] = arith.addf %[[M5]], %[[A4]] fastmath<contract> : f32
// CHECK-NEXT:  %[[M4:.*]] = arith.mulf %[[P4]], %[[R]] fastmath<contract> : f32
// CHECK-NEXT:  %[[A3:.*]] = arith.constant 0.333352745 : f32
// CHECK-NEXT:  %[[P3:.*]] = arith.addf %[[M4]], %[[A3]] fastmath<contract> : f32
// CHECK-NEXT:  %[[M3:.*]] = arith.mulf %[[P3]], %[[R]] fastmath<contract> : f32
// CHECK-NEXT:  %[[A2:.*]] = arith.constant 0.999982953 : f32
// CHECK-NEXT:  %[[P2:.*]] = arith.addf %[[M3]], %[[A2]] fastmath<contract> : f32
// CHECK-NEXT:  %[[M2:.*]] = arith.mulf %[[P2]], %[[R]] fastmath<contract> : f32
// CHECK-NEXT:  %[[A1:.*]] = arith.constant 1.9999994 : f32
// CHECK-NEXT:  %[[P1:.*]] = arith.addf %[[M2]], %[[A1]] fastmath<contract> : f32
// CHECK-NEXT:  %[[M1:.*]] = arith.mulf %[[P1]], %[[R]] fastmath<contract> : f32
// CHECK-NEXT:  %[[A0:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:  %[[Y:.*]] = arith.addf %[[M1]], %[[A0]] fastmath<contract> : f32
// CHECK-NEXT:  %[[TI:.*]] = arith.bitcast %[[T]] : f32 to i32
// CHECK-NEXT:  %[[C23:.*]] = arith.constant 23 : i32
// CHECK-NEXT:  %[[BITS:.*]] = arith.shli %[[TI]], %[[C23]] : i32
// CHECK-NEXT:  %[[HALF:.*]] = arith.bitcast %[[BITS]] : i32 to f32
// CHECK-NEXT:  %[[V:.*]] = arith.mulf %[[Y]], %[[HALF]] fastmath<contract> : f32
// CHECK-NEXT:  func.return %[[V]] : f32
func.func @exp(%x: f32) -> f32 {
  %0 = math.exp %x : f32
  func.return %0 : f32
}

// -----

// Softmax's exp(x - max(x)): the argument is at most 0, so no clamp at 89, only the low one.
// This holds through a scale (the same expression on both sides, constants equal by value)
// and with the loops' bounds equal by value.
// CHECK-LABEL: func.func @softmax_row(
// CHECK:       %[[M:.*]] = scf.for
// CHECK:       scf.for
// CHECK:       %[[D:.*]] = arith.subf %{{.*}}, %[[M]] : f32
// CHECK-NEXT:  %[[LOW:.*]] = arith.constant -87.3365479 : f32
// CHECK-NEXT:  arith.cmpf olt, %[[D]], %[[LOW]] : f32
// CHECK-NOT:   8.900000e+01
// CHECK:       func.return
func.func @softmax_row(%x: memref<4x16xf32>, %y: memref<4x16xf32>, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %low = arith.constant 0xff800000 : f32
  %m = scf.for %j = %c0 to %c16 step %c1 iter_args(%acc = %low) -> (f32) {
    %v = memref.load %x[%i, %j] : memref<4x16xf32>
    %s = arith.constant 0.125 : f32
    %w = arith.mulf %v, %s : f32
    %n = arith.maximumf %acc, %w fastmath<nsz> : f32
    scf.yield %n : f32
  }
  %d0 = arith.constant 0 : index
  %d1 = arith.constant 1 : index
  %d16 = arith.constant 16 : index
  scf.for %k = %d0 to %d16 step %d1 {
    %v = memref.load %x[%i, %k] : memref<4x16xf32>
    %s = arith.constant 0.125 : f32
    %w = arith.mulf %v, %s : f32
    %d = arith.subf %w, %m : f32
    %e = math.exp %d : f32
    memref.store %e, %y[%i, %k] : memref<4x16xf32>
  }
  func.return
}

// -----

// The clamp at 89 stays where x - max(...) is not known to be at most 0: the max is over
// other indices (a shifted load), over a longer range, over a memref the function writes,
// or is a min.
// CHECK-LABEL: func.func @not_bounded(
// CHECK-COUNT-4: arith.constant 8.900000e+01 : f32
// CHECK-NOT:   arith.constant 8.900000e+01 : f32
// CHECK:       func.return
func.func @not_bounded(%x: memref<20xf32>, %y: memref<20xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c20 = arith.constant 20 : index
  %low = arith.constant 0xff800000 : f32
  %m = scf.for %j = %c0 to %c16 step %c1 iter_args(%acc = %low) -> (f32) {
    %v = memref.load %x[%j] : memref<20xf32>
    %n = arith.maximumf %acc, %v : f32
    scf.yield %n : f32
  }
  %mn = scf.for %j = %c0 to %c16 step %c1 iter_args(%acc = %low) -> (f32) {
    %v = memref.load %x[%j] : memref<20xf32>
    %n = arith.minimumf %acc, %v : f32
    scf.yield %n : f32
  }
  %my = scf.for %j = %c0 to %c16 step %c1 iter_args(%acc = %low) -> (f32) {
    %v = memref.load %y[%j] : memref<20xf32>
    %n = arith.maximumf %acc, %v : f32
    scf.yield %n : f32
  }
  scf.for %k = %c0 to %c16 step %c1 {
    %k1 = arith.addi %k, %c1 : index
    %v = memref.load %x[%k1] : memref<20xf32>
    %d = arith.subf %v, %m : f32
    %e = math.exp %d : f32
    memref.store %e, %y[%k] : memref<20xf32>
  }
  scf.for %k = %c0 to %c20 step %c1 {
    %v = memref.load %x[%k] : memref<20xf32>
    %d = arith.subf %v, %m : f32
    %e = math.exp %d : f32
    memref.store %e, %y[%k] : memref<20xf32>
  }
  scf.for %k = %c0 to %c16 step %c1 {
    %v = memref.load %y[%k] : memref<20xf32>
    %d = arith.subf %v, %my : f32
    %e = math.exp %d : f32
    memref.store %e, %y[%k] : memref<20xf32>
  }
  scf.for %k = %c0 to %c16 step %c1 {
    %v = memref.load %x[%k] : memref<20xf32>
    %d = arith.subf %v, %mn : f32
    %e = math.exp %d : f32
    memref.store %e, %y[%k] : memref<20xf32>
  }
  func.return
}

// -----

// Inside loops too (the walk reaches nested regions).
// CHECK-LABEL: func.func @in_loop(
// CHECK:       scf.for
// CHECK:       arith.cmpf oge
// CHECK:       arith.select
// CHECK:       memref.store
func.func @in_loop(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<8xf32>
    %t = math.tanh %v : f32
    memref.store %t, %x[%i] : memref<8xf32>
  }
  func.return
}

// -----

// Only scalar f32 is rewritten: f16 and vectors keep their math ops.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NEXT:  math.tanh %{{.*}} : f16
// CHECK-NEXT:  math.erf %{{.*}} : f16
// CHECK-NEXT:  math.tanh %{{.*}} : vector<4xf32>
// CHECK-NEXT:  math.exp %{{.*}} : f16
// CHECK-NEXT:  func.return
func.func @left_alone(%h: f16, %v: vector<4xf32>) -> (f16, f16, vector<4xf32>, f16) {
  %0 = math.tanh %h : f16
  %1 = math.erf %h : f16
  %2 = math.tanh %v : vector<4xf32>
  %3 = math.exp %h : f16
  func.return %0, %1, %2, %3 : f16, f16, vector<4xf32>, f16
}
