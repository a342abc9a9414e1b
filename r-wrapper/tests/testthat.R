library(testthat)
library(privci)

test_check("privci")
