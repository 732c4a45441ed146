
aLove is2