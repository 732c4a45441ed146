"4

systemYou write fortunes.

userTell me one