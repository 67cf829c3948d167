"""A panel of prose passages for the benchmarks that measure what a writer reads.

Twenty-four passages written for LLooM (no copied text), one genre each: fairy tale,
noir, science fiction, romance, horror, literary, western, comedy, letters, a diary,
children's, fantasy, thriller, mystery, historical, cyberpunk, a sea story, sports,
a ghost story, a fable, magical realism, a cosy village, war and a school story. Each
is 300-800 characters and ends where a story goes on (mid-sentence or after one), so
a search from it is what a writer at that point would ask for.

    from bench.panel import PASSAGES   # tuple of (genre, text)
"""

from __future__ import annotations

PASSAGES: tuple[tuple[str, str], ...] = (
    (
        "fairy tale",
        "Long ago, in a kingdom where the rivers ran uphill on feast days, there lived a "
        "miller's daughter who could not tell a lie. This was a great nuisance to her "
        "father, who owed money to half the valley, and a greater one to the king, who "
        "liked to be told that his poems were good. One spring morning a messenger in a "
        "green cloak knocked at the mill and said that the king wished to see her at once. "
        "The girl wiped the flour from her hands, looked at her father, and",
    ),
    (
        "noir",
        "The rain had been falling on the city for three days, and it had not washed "
        "anything clean. I sat in my office with the lights off, listening to the radiator "
        "argue with itself, when the door opened without a knock. She wore a grey coat and "
        "the kind of hat that costs more than my rent. She put an envelope on my desk and "
        "said her husband had been dead for a week, and nobody had noticed but her. I asked "
        "her why she had come to me instead of the police. She smiled, and",
    ),
    (
        "science fiction",
        "The colony ship had been silent for nine hundred years when the first of the "
        "sleepers woke. Mara Okafor opened her eyes to a ceiling she did not recognise and a "
        "voice that was not the ship's. It told her, politely, that the destination had been "
        "reached, that the planet was habitable, and that there was a small problem with the "
        "crew manifest. She sat up, her muscles aching, and asked what kind of problem. The "
        "voice paused for a long moment before it answered.",
    ),
    (
        "romance",
        "Every Thursday at four o'clock, Elena bought a loaf of rye bread she did not need "
        "from the bakery on Harrow Street, because the baker had flour on his eyebrows and "
        "laughed at his own jokes before he finished them. She had been doing this for "
        "eleven weeks. Today, when she reached the counter, there was no rye bread left, and "
        "he was looking at her with an expression she had not seen before. He cleared his "
        "throat and said that he had saved one for her, if she wanted it, and",
    ),
    (
        "horror",
        "The house at the end of Bellwether Lane had been empty since the winter the lake "
        "froze solid, and the children of the village dared each other to touch its gate. "
        "Tom was eleven and did not believe in anything he could not see. He walked up the "
        "path while his friends watched from the road, climbed the three rotten steps, and "
        "put his hand flat against the front door. It was warm. From somewhere deep inside "
        "the house came the sound of",
    ),
    (
        "literary",
        "My mother kept every letter she ever received in a biscuit tin under her bed, and "
        "when she died it was the only thing my brother and I did not argue about. We sat "
        "at her kitchen table on a grey afternoon in March and opened it together. The "
        "letters were older than either of us, and most of them were from a man whose name "
        "we had never heard. My brother read the first one aloud, slowly, and when he "
        "reached the end he put it down and",
    ),
    (
        "western",
        "The stage from Abilene came into Dry Fork two hours late, with one horse lame and "
        "a bullet hole in the driver's hat. The town turned out to watch, because nothing "
        "else had happened since the well went bad. The driver climbed down, spat in the "
        "dust, and said he had been stopped at Cutter's Pass by a rider who took nothing "
        "but a single letter from the mail sack. The sheriff asked who the letter had been "
        "addressed to. The driver looked at him for a long time and",
    ),
    (
        "comedy",
        "Gerald had planned the dinner party for six weeks, and so far the soup had caught "
        "fire, the dog had eaten the fish, and his mother-in-law had arrived with a man she "
        "introduced as her life coach. The guests were now seated around the table, staring "
        "at a bowl of crisps that Gerald had placed there with as much dignity as he could "
        "manage. He raised his glass, cleared his throat, and announced that he had a few "
        "words to say. Unfortunately,",
    ),
    (
        "letters",
        "Dear Ruth, I am writing this by candlelight because the storm took the power out "
        "again, and the farm feels very large and very quiet without you. The cows are well. "
        "The roof over the barn is not. Your father says he will fix it before the snow, "
        "which means I will fix it before the snow. I found the book you left on the window "
        "seat and I have been reading it in the evenings, though I confess I do not "
        "understand why anyone would",
    ),
    (
        "diary",
        "Tuesday. Woke at six to the sound of the neighbours moving furniture, or possibly "
        "a body. Made coffee. Burned toast. Decided that today would be the day I finally "
        "finished the novel, and then spent two hours reorganising my bookshelves by colour "
        "instead. In the afternoon the postman brought a letter from the publisher, which I "
        "have not yet opened. It is sitting on the kitchen table, looking at me. I think I "
        "will open it after",
    ),
    (
        "children's",
        "Pip was the smallest hedgehog in the whole of Bramble Wood, and everybody told him "
        "so. The rabbits told him so, the squirrels told him so, and even the snails, who "
        "were smaller than he was, told him so when they thought he was not listening. One "
        "autumn evening, as the leaves came down like golden rain, Pip found a door at the "
        "bottom of the old oak tree that had never been there before. It was just the right "
        "size for a hedgehog, and it was",
    ),
    (
        "fantasy",
        "The dragon had slept beneath the mountain for a thousand years, and the people of "
        "the valley had built their houses on its back without knowing it. They farmed the "
        "warm slopes, they drank from the springs that ran hot in winter, and they told "
        "their children that the rumbling at night was only thunder. Then, on the first day "
        "of the harvest, the old shepherd Anwen climbed to the highest pasture and saw that "
        "the mountain had opened one enormous eye.",
    ),
    (
        "thriller",
        "The call came at 3:14 in the morning, which was how Daniel knew it was bad. Nobody "
        "from the embassy rang before breakfast unless someone had died or was about to. "
        "The voice on the line was one he had not heard in six years, and it gave him an "
        "address in the old port, a time, and a single instruction: come alone and do not "
        "bring your phone. He sat on the edge of the bed in the dark for a full minute. Then "
        "he got dressed,",
    ),
    (
        "mystery",
        "Inspector Hale stood in the middle of the library and looked at the body, the "
        "locked door, the locked window, and the fire that had been lit some time after "
        "midnight by someone who was not the victim. The butler said he had heard nothing. "
        "The niece said she had been asleep. The gardener said nothing at all, which Hale "
        "found the most interesting answer of the three. He bent down beside the hearth, "
        "picked up a scrap of half-burned paper, and read",
    ),
    (
        "historical",
        "In the summer of 1851, when the whole of London seemed to be walking towards Hyde "
        "Park to see the great glass palace, Agnes Ferrow was walking the other way. She had "
        "a basket on her arm, a borrowed bonnet on her head, and a letter in her pocket that "
        "could hang a man if the wrong person read it. At the corner of Piccadilly a "
        "constable stepped into her path, touched his hat, and asked if she had lost her "
        "way. Agnes smiled at him and said",
    ),
    (
        "cyberpunk",
        "Neon bled through the rain onto the cracked screen of Kai's handset, turning every "
        "message the colour of a bruise. The job was simple, the broker had said: walk into "
        "the Meridian tower, plug a shard into the forty-second floor's climate controller, "
        "and walk out. Nobody mentioned the security drones, or the fact that the climate "
        "controller was talking back. Kai crouched behind a server rack, counted to three, "
        "and whispered to the machine that",
    ),
    (
        "sea story",
        "We were nine days out of Lisbon when the wind died, and the sea went flat as a "
        "plate of pewter. The captain paced the quarterdeck from dawn until dark, looking at "
        "the sky as if he could shame it into moving. On the tenth morning the lookout called "
        "down that there was a ship off the starboard bow, becalmed like us, with her sails "
        "hanging loose and no one at her wheel. The captain lowered his glass and ordered",
    ),
    (
        "sports",
        "There were forty seconds left on the clock, and the Harbour Street Hawks were down "
        "by one point in the final of a tournament nobody had expected them to reach. Coach "
        "Delgado called a time-out and looked at the five exhausted teenagers in front of "
        "him. He had drawn up a play for exactly this moment, and now, looking at their "
        "faces, he tore it in half. He knelt down so that he was looking up at them and "
        "said,",
    ),
    (
        "ghost story",
        "Grandmother always set an extra place at the table on the first night of winter, "
        "and she never told us who it was for. The plate was blue, older than the others, "
        "with a chip on its rim shaped like a crescent moon. The year I turned fourteen I "
        "decided to stay awake and see what happened to the food. I hid on the stairs with a "
        "blanket and watched the kitchen for hours, until the clock struck two and",
    ),
    (
        "fable",
        "A crow who was very proud of her voice once found a piece of silver on the road. She "
        "carried it to the top of the tallest pine and sat there admiring it, turning it this "
        "way and that so it caught the sun. Below her a fox, who had no use for silver but a "
        "great deal of use for a proud bird, sat down in the grass and began to sigh loudly. "
        "The crow asked him what was the matter, and the fox replied that",
    ),
    (
        "magical realism",
        "In our town it rained fish every seventh Sunday, and nobody thought this was "
        "strange. The baker left his awnings open to catch the small silver ones, the "
        "schoolmaster kept a tally on the church door, and the mayor gave a speech each "
        "time about civic resilience. So when it rained letters instead, thousands of "
        "them, folded and sealed and addressed in handwriting no one recognised, the whole "
        "town stood in the square and",
    ),
    (
        "cosy village",
        "The Little Dunmore flower show had been cancelled only once in its history, during "
        "the great marrow scandal of 1987, and Mrs Penrose was determined that it would not "
        "happen again on her watch. She had inspected every tent, interrogated every judge "
        "and personally counted the jam jars. Yet at half past nine on the morning of the "
        "show, the prize-winning dahlias were missing, and the vicar was standing in her "
        "kitchen holding a muddy spade.",
    ),
    (
        "war",
        "The shelling stopped an hour before dawn, and the silence was worse. In the trench "
        "the men did not speak; they checked their rifles, drank the last of the cold tea "
        "and looked at the ladders. Corporal Reyes had a photograph in his breast pocket that "
        "he had not taken out since the summer. He took it out now, looked at it for a long "
        "moment in the grey light, and handed it to the boy beside him, saying",
    ),
    (
        "school story",
        "On the first day of term at Ashcombe Grammar, a new girl arrived in the middle of "
        "assembly, walked straight down the centre aisle while the headmaster was speaking, "
        "and sat in the front row as if she had always been there. She had a rucksack "
        "covered in badges from countries none of us could name, and she was holding a "
        "violin case with a padlock on it. When the headmaster asked who she was, she stood "
        "up and",
    ),
)
