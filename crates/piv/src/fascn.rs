//! FASC-N (SP 800-73-4 / TIG SCEPACS): 200-bit BCD encoding with odd parity and LRC.
